"""The integration tests' corpus: a dozen invented documents with metadata and one bridge question
(the answer's passage shares only an entity, the company, with the best passage), and a scripted
LLM whose answer depends on the passages it is given."""
from __future__ import annotations

QUESTION = "Who founded the company that manufactures the Zorblat X2 phone?"
ANSWER = "Mara Veldt"

DOCS = [
    ("zorblat", "Zorblat X2", "The Zorblat X2 is a folding phone sold since 2019. The phone is manufactured by "
     "Quillon Industries at a plant on the northern river, and its hinge was praised by reviewers.",
     {"topic": "product", "year": 2019, "lang": "en"}),
    ("quillon", "Quillon Industries", "Quillon Industries is an electronics maker founded by Mara Veldt in 1987. "
     "Its headquarters stand in Tessaly, where it employs about four thousand people.",
     {"topic": "company", "year": 1987, "lang": "en"}),
    ("veldt", "Mara Veldt", "Mara Veldt is an engineer and entrepreneur born in Orvane. She studied physics at "
     "the university of Tessaly before she started her own firm.", {"topic": "person", "year": 1961, "lang": "en"}),
    ("tessaly", "Tessaly", "Tessaly is a coastal town known for its harbour, its glassworks and a yearly "
     "festival of boats.", {"topic": "place", "year": 1402, "lang": "en"}),
    ("orvane", "Orvane", "Orvane is a mountain village with a small observatory and a cheese market held "
     "every Thursday.", {"topic": "place", "year": 1211, "lang": "en"}),
    ("brindle", "Brindle Pad", "The Brindle Pad is a tablet computer designed by Halvorsen Labs and sold in "
     "2021. Its screen folds twice.", {"topic": "product", "year": 2021, "lang": "en"}),
    ("halvorsen", "Halvorsen Labs", "Halvorsen Labs is a research company founded by Ivo Pettersen in 2003. It "
     "builds tablets and e-readers.", {"topic": "company", "year": 2003, "lang": "en"}),
    ("pettersen", "Ivo Pettersen", "Ivo Pettersen is a designer who grew up in Orvane and later taught "
     "industrial design.", {"topic": "person", "year": 1970, "lang": "en"}),
    ("kettle", "Copper kettles", "Copper kettles heat water quickly because copper conducts heat well; they "
     "need polishing to stay bright.", {"topic": "household", "year": 1850, "lang": "en"}),
    ("hinge", "Phone hinges", "A folding phone needs a hinge that survives many thousand openings; makers test "
     "hinges with robotic arms.", {"topic": "product", "year": 2020, "lang": "en"}),
    ("glass", "Tessaly glassworks", "The glassworks of Tessaly have made bottles and lenses since the "
     "fifteenth century.", {"topic": "place", "year": 1450, "lang": "de"}),
    ("boats", "Festival of boats", "The festival of boats fills the harbour with painted boats each summer.",
     {"topic": "event", "year": 1902, "lang": "de"}),
]


def docs():
    return [{"id": i, "title": t, "text": x, "metadata": m} for i, t, x, m in DOCS]


def answer_script(messages):
    """Scripted replies for every LLM stage: rewrites echo the question, rerank keeps the order, and the
    answer is ANSWER only when a passage given to it contains the founder, else 'unknown'."""
    u = messages[-1]["content"]
    if "Answer the question" in u:
        return ANSWER if ANSWER in u else "unknown"
    if "Passages:" in u:
        return "1, 2, 3"
    return QUESTION
