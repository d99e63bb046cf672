"""``eagle-audit check``: one command for "why is my accept length low?" (docs/check.md)."""


from .. import api_module as _api_module  # noqa: E402

_api_module(__name__)  # callable as eagle_audit.api.check
