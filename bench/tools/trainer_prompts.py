"""Chat prompts composed from templates, to give the real-trainer fixtures (bench/evidence/trainer_fixtures.py) more
training text than the 207 hand-written prompts of ``bench/data/canary_prompts.jsonl``.

The limit of those fixtures was the text, not the epochs: SpecForge 0.2.0's draft reached train acc_0 0.577
against eval 0.483 on 1,002 responses to 167 prompts, flat over its last 3 epochs (docs/fingerprint.md).
A real draft is trained on a corpus of many thousands of prompts (ShareGPT, UltraChat); no such corpus can be
downloaded on these machines, so this module composes prompts: a task form (explain, compare, list, write
a story, a function, ...) crossed with a subject from many fields. The responses, which the trainers learn
from, are still the target's own generations (bench/evidence/trainer_fixtures.py); only the prompts are composed.

Assumption (stated): template prompts are less varied in form than real user prompts, so a draft trained on
them may generalise less to hand-written held-out prompts than one trained on a real corpus of the same size.
The held-out prompts stay the last 40 hand-written ones of canary_prompts.jsonl, never composed ones.
"""

from __future__ import annotations

import random

SUBJECTS = (
    "photosynthesis", "black holes", "the water cycle", "plate tectonics", "vaccines", "the immune system",
    "climate change", "renewable energy", "nuclear fission", "the periodic table", "DNA replication",
    "evolution by natural selection", "the human heart", "sleep", "memory", "volcanoes", "ocean tides",
    "the moon landing", "the Roman Empire", "the French Revolution", "the printing press", "the Silk Road",
    "the Industrial Revolution", "ancient Egypt", "the Renaissance", "the Cold War", "democracy",
    "inflation", "interest rates", "the stock market", "budgeting", "compound interest", "supply and demand",
    "cryptocurrency", "small businesses", "remote work", "job interviews", "public speaking", "leadership",
    "time management", "learning a new language", "studying for exams", "online privacy", "passwords",
    "machine learning", "neural networks", "the internet", "cloud computing", "databases", "recursion",
    "sorting algorithms", "binary search", "version control with git", "unit testing", "Python lists",
    "regular expressions", "hash tables", "operating systems", "computer viruses", "smartphones",
    "electric cars", "airplanes", "bicycles", "trains", "bridges", "skyscrapers", "3D printing", "robots",
    "baking bread", "making pasta", "a healthy breakfast", "vegetarian cooking", "coffee", "tea", "chocolate",
    "gardening", "houseplants", "composting", "bees", "dogs", "cats", "birds migrating", "coral reefs",
    "rainforests", "deserts", "the Arctic", "recycling", "plastic pollution", "clean water", "earthquakes",
    "hurricanes", "weather forecasts", "the seasons", "stars", "Mars", "the solar system", "telescopes",
    "music theory", "learning the piano", "jazz", "painting with watercolors", "photography", "poetry",
    "writing a novel", "movies", "chess", "soccer", "running a marathon", "yoga", "meditation", "friendship",
    "kindness", "moving to a new city", "travelling on a budget", "camping", "hiking safety", "first aid",
    "a job as a nurse", "a job as a teacher", "a job as a software engineer", "volunteering", "libraries",
    "museums", "city parks", "public transport", "traffic", "maps", "time zones", "calendars", "money",
)

FORMS = (
    "Explain {s} to a ten-year-old.",
    "Explain {s} in simple terms.",
    "What is the most important thing to know about {s}?",
    "Give me three interesting facts about {s}.",
    "What are the main advantages and disadvantages of {s}?",
    "Write a short story that involves {s}.",
    "Write a short poem about {s}.",
    "Summarize the history of {s} in a paragraph.",
    "What are common misconceptions about {s}?",
    "How would you teach a beginner about {s}?",
    "List five questions a student might ask about {s}, with short answers.",
    "Write a friendly email to a colleague explaining {s}.",
    "Why should people care about {s}?",
    "Describe {s} as if you were a tour guide.",
    "What should someone read first to learn about {s}?",
    "Give me a step-by-step guide related to {s}.",
    "Compare {s} with {t}.",
    "How are {s} and {t} connected?",
    "Write a short dialogue between two friends talking about {s}.",
    "What would the world look like without {s}?",
    "Give three tips for someone interested in {s}.",
    "Write a one-paragraph news report about a discovery in {s}.",
)


def composed(n: int, exclude: set[str] = frozenset(), seed: int = 0) -> list[str]:
    """``n`` distinct prompts (user messages), deterministic for a seed, none of them in ``exclude``."""
    rng = random.Random(seed)
    out: list[str] = []
    seen = set(exclude)
    pool = [(f, s) for f in FORMS for s in SUBJECTS]
    rng.shuffle(pool)
    for f, s in pool:
        t = SUBJECTS[(SUBJECTS.index(s) + 1 + rng.randrange(len(SUBJECTS) - 1)) % len(SUBJECTS)]
        text = f.format(s=s, t=t)
        text = text[0].upper() + text[1:]
        if text in seen:
            continue
        seen.add(text)
        out.append(text)
        if len(out) == n:
            return out
    raise ValueError(f"only {len(out)} distinct composed prompts, {n} asked")
