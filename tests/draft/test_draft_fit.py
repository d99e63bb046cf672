"""Does a draft fit a target (eagle_audit/draft/fit.py): the aux count, or bad input naming the draft."""

import pytest

from eagle_audit.draft.fit import check_target_fit
from eagle_audit.draft.read import read_draft
from eagle_audit.errors import BadCheckpoint
from eagle_audit.target import TargetInfo


def info(hidden=32, vocab=512):
    return TargetInfo(name="tiny-target", source="tiny-target", architecture="LlamaForCausalLM", model_type="llama",
                      num_layers=8, hidden_size=hidden, vocab_size=vocab, config_sha256="0" * 64)


def test_check_target_fit(make_draft):
    assert check_target_fit(read_draft(str(make_draft())), info()) == 3
    other = read_draft(str(make_draft(target_hidden=48)))  # fc takes 3 x 48 = 144
    with pytest.raises(BadCheckpoint, match="built for a target of hidden size 48 \\(fc.weight takes 144 "
                                            "inputs\\), but tiny-target has hidden size 32") as e:
        check_target_fit(other, info())
    assert other.path in e.value.message
    with pytest.raises(BadCheckpoint, match="hidden size 48"):
        check_target_fit(other, info(hidden=24))  # 144 = 6 x 24 fits by width, but target_hidden_size says 48
    with pytest.raises(BadCheckpoint, match="vocab_size 512 differs from the target's 1024: a draft for another"):
        check_target_fit(read_draft(str(make_draft())), info(vocab=1024))
