"""Writes the shipped sentence-pair files: an entailment task that word matching does not solve and that
a small transformer learns within a CPU budget.

No PyPI package ships a real sentence-pair dataset, so the shipped task is generated (run once; the JSONL
files are committed). The first templates were solved by word matching (bag-of-words 99.9 %). In every
construction here the label depends on premise and hypothesis *together*, and every hypothesis form
occurs with both labels:

- negation: "did not" / "was not" in the premise, the hypothesis, both or neither (active or passive);
  entailed iff the polarities agree (an XOR no single word gives away);
- embedded clauses: "A knew that B called C" entails "B called C" (or its passive); "A believed that ..."
  does not, nor does the clause with its roles swapped under a factive verb;
- quantifiers: all / some / none of a group in premise and hypothesis; every hypothesis quantifier
  occurs with both labels equally often;
- events: the same event in other words ("purchased a bicycle" / "bought a bike") against the opposite
  event, in the premise's words or others ("sold a bike" / "got rid of a bicycle").

Each premise opens RTE-style ("According to a report published on Monday by a newspaper in Lisbon, ...")
and is followed by 0, 1, 2 or 3 side sentences of context that never bear on the label, a quarter of the
rows each: pairs are 24-110 word pieces (median 59; half of them 60-120, RTE's range), premises a median
41 words. When every premise carried one or two side sentences MiniLM-L6 did not start learning within a
few hundred CPU steps; the short quarter lets learning start (after ~150 steps) and it then holds at every
length (``bench/nas_learnability.py``, ``bench/README-nas.md``). Subject/object swaps and two-fact binding
were tried and not learned in that budget, so they are not shipped. Labels are balanced within every
construction. Baselines: ``bench/nas_baselines.py``.

    python training_code/nas/sample_data/generate_pairs.py [OUTPUT_DIR]
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

NAMES = [
    "Anna Berger",
    "Ben Okafor",
    "Carla Ruiz",
    "David Chen",
    "Elena Petrova",
    "Farid Haddad",
    "Grace Kim",
    "Hiro Tanaka",
    "Ines Moreau",
    "Jonas Weber",
    "Kemal Aydin",
    "Lena Novak",
    "Marco Rossi",
    "Nadia Karim",
    "Omar Said",
    "Priya Nair",
    "Quentin Dubois",
    "Rosa Lopez",
    "Samir Patel",
    "Tara Walsh",
    "Ugo Bianchi",
    "Vera Ivanova",
    "Wei Zhang",
    "Yusuf Demir",
    "Zoe Martin",
    "Arjun Rao",
    "Beatriz Silva",
    "Colin Murphy",
    "Dana Levi",
    "Erik Larsen",
]
ROLES = [
    "the doctor",
    "the lawyer",
    "the senator",
    "the manager",
    "the artist",
    "the banker",
    "the judge",
    "the professor",
    "the student",
    "the journalist",
    "the secretary",
    "the president",
    "the athlete",
    "the author",
    "the tourist",
    "the actor",
    "the scientist",
    "the engineer",
    "the farmer",
    "the pilot",
]
CITIES = [
    "Paris",
    "Lisbon",
    "Berlin",
    "Madrid",
    "Oslo",
    "Vienna",
    "Prague",
    "Dublin",
    "Rome",
    "Athens",
    "Warsaw",
    "Zurich",
    "Munich",
    "Seville",
    "Porto",
    "Geneva",
    "Nairobi",
    "Lima",
    "Osaka",
    "Toronto",
]
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Transitive verbs: (past, participle, bare); none symmetric ("met" would make swaps entailed).
VERBS = [
    ("hired", "hired", "hire"), ("called", "called", "call"), ("thanked", "thanked", "thank"),
    ("interviewed", "interviewed", "interview"), ("recommended", "recommended", "recommend"),
    ("paid", "paid", "pay"), ("criticised", "criticised", "criticise"), ("helped", "helped", "help"),
    ("followed", "followed", "follow"), ("warned", "warned", "warn"), ("invited", "invited", "invite"),
    ("sued", "sued", "sue"), ("praised", "praised", "praise"), ("contacted", "contacted", "contact"),
    ("replaced", "replaced", "replace"), ("supported", "supported", "support"),
]  # fmt: skip
FACTIVE = ("knew", "realised", "noticed", "discovered", "confirmed", "proved")
NON_FACTIVE = ("believed", "hoped", "claimed", "suspected", "assumed", "feared", "doubted", "denied")
# Events: two phrasings that share few words, and the opposite event, phrased two ways as well.
EVENTS = [
    (("purchased a bicycle", "bought a bike"), ("sold a bike", "got rid of a bicycle")),
    (("sold the old car", "found a buyer for the old vehicle"), ("bought the old car", "acquired the old vehicle")),
    (("won the chess tournament", "came first in the chess competition"),
     ("lost the chess tournament", "was beaten in the chess competition")),
    (("opened a small bakery", "started a little bread shop"),
     ("closed a small bakery", "shut down a little bread shop")),
    (("repaired the roof", "fixed the top of the house"), ("damaged the roof", "broke the top of the house")),
    (("adopted a dog", "took in a puppy"), ("gave away a dog", "found a new home for a puppy")),
    (("arrived early", "got there ahead of time"), ("arrived late", "got there after the start")),
    (("accepted the offer", "said yes to the proposal"), ("rejected the offer", "turned down the proposal")),
    (("joined the committee", "became a member of the board"), ("left the committee", "resigned from the board")),
    (("passed the exam", "succeeded in the test"), ("failed the exam", "did badly in the test")),
    (("increased the budget", "put more money into the plan"), ("cut the budget", "reduced the money for the plan")),
    (("remembered the meeting", "did not forget the appointment"),
     ("forgot the meeting", "did not remember the appointment")),
]  # fmt: skip
GROUPS = ("students", "workers", "passengers", "players", "visitors", "members", "nurses", "drivers")
GROUP_EVENTS = (
    "signed the petition", "attended the meeting", "voted for the plan", "took the early train",
    "stayed until the end", "received a bonus", "asked for a refund", "joined the strike",
)  # fmt: skip
# Entailed (premise quantifier, hypothesis quantifier) pairs; every other pair of the three is not entailed.
QUANTIFIERS = ("All of the", "Some of the", "None of the")
QUANTIFIER_ENTAILS = {("All of the", "All of the"), ("All of the", "Some of the"), ("Some of the", "Some of the"),
                      ("None of the", "None of the")}  # fmt: skip
CONTEXT_BEFORE = [
    "According to a report published on {day} by a newspaper in {city},",
    "In a statement released late on {day}, officials in {city} said that",
    "Local radio in {city} reported on {day} that,",
    "Speaking to reporters in {city} after a long meeting on {day}, a spokesperson confirmed that",
    "As several witnesses in {city} told the police on {day},",
    "During a busy week in {city}, which ended with a public holiday on {day},",
]
# Side sentences after the fact (RTE premises carry such context); they never bear on the label.
CONTEXT_AFTER = [
    "The news spread quickly among the residents of {city}, many of whom had followed the story for weeks.",
    "{other} later told friends that the weather in {city} had been unusually cold that {day}.",
    "The event took place a few streets away from the central station of {city}, near the old market.",
    "A spokesperson for the city of {city} declined to comment on the matter when contacted on {day}.",
    "{other}, who works for a small company in {city}, said the whole week had been very busy.",
    "Officials expect a full report to be published in {city} before the end of the month.",
]


def pick(rng: random.Random, pool, *avoid):
    return rng.choice([item for item in pool if item not in avoid])


def person(rng: random.Random, *avoid) -> str:
    """A named person or a role ("the doctor"): roles make swaps read like HANS."""
    return pick(rng, NAMES if rng.random() < 0.6 else ROLES, *avoid)


def cap(text: str) -> str:
    return text[0].upper() + text[1:]


def active(a: str, verb: tuple, b: str) -> str:
    return f"{a} {verb[0]} {b}"


def passive(a: str, verb: tuple, b: str) -> str:
    return f"{b} was {verb[1]} by {a}"


def negated(a: str, verb: tuple, b: str, rng: random.Random) -> str:
    return f"{a} did not {verb[2]} {b}" if rng.random() < 0.5 else f"{b} was not {verb[1]} by {a}"


def embedded_pair(rng: random.Random, entailed: bool):
    """Factive vs non-factive embedding: the hypothesis is the embedded clause (or its roles swapped), so
    only a factive verb with the clause's own roles entails it."""
    a = person(rng)
    b = person(rng, a)
    c = person(rng, a, b)
    verb = rng.choice(VERBS)
    form = active if rng.random() < 0.5 else passive
    if entailed:
        attitude, hypothesis = rng.choice(FACTIVE), form(b, verb, c)
    elif rng.random() < 0.5:
        attitude, hypothesis = rng.choice(NON_FACTIVE), form(b, verb, c)
    else:
        attitude, hypothesis = rng.choice(FACTIVE), form(c, verb, b)
    return f"{a} {attitude} that {active(b, verb, c)}", hypothesis


def negation_pair(rng: random.Random, entailed: bool):
    """Polarity of premise and hypothesis together decides (an XOR no single word gives away)."""
    a = person(rng)
    b = person(rng, a)
    verb = rng.choice(VERBS)
    positive = rng.random() < 0.5
    premise = (active if rng.random() < 0.5 else passive)(a, verb, b) if positive else negated(a, verb, b, rng)
    wants_positive = positive == entailed
    hypothesis = (active if rng.random() < 0.5 else passive)(a, verb, b) if wants_positive else negated(a, verb, b, rng)
    return premise, hypothesis


def quantifier_pair(rng: random.Random, entailed: bool):
    """all / some / none in premise and hypothesis: the pair decides, and every hypothesis quantifier
    occurs with both labels equally often (so the hypothesis alone says nothing)."""
    group, event = rng.choice(GROUPS), rng.choice(GROUP_EVENTS)
    hypothesis_quantifier = rng.choice(QUANTIFIERS)
    premises = [q for q in QUANTIFIERS if ((q, hypothesis_quantifier) in QUANTIFIER_ENTAILS) == entailed]
    return f"{rng.choice(premises)} {group} {event}", f"{hypothesis_quantifier} {group} {event}"


def event_pair(rng: random.Random, entailed: bool):
    """The same event in other words vs the opposite event, in the premise's words or others."""
    a = person(rng)
    event, opposite = rng.choice(EVENTS)
    if rng.random() < 0.5:
        event, opposite = opposite, event
    premise_phrase = rng.choice(event)
    hypothesis_phrase = event[1 - event.index(premise_phrase)] if entailed else rng.choice(opposite)
    return f"{a} {premise_phrase}", f"{a} {hypothesis_phrase}"


FAMILIES: dict[str, Callable] = {
    "negation": negation_pair,
    "embedded": embedded_pair,
    "quantifiers": quantifier_pair,
    "events": event_pair,
}


LOWERED_OPENINGS = ("The", "All", "Some", "None")
SIDE_SENTENCES = (0, 1, 2, 3)


def with_context(core: str, rng: random.Random, side_sentences: int, avoid: str) -> str:
    """Opens the fact with an RTE-style lead-in (source, place, day) and follows it with
    ``side_sentences`` sentences of context that do not bear on the label."""
    city, day = rng.choice(CITIES), rng.choice(DAYS)
    fill = {"city": city, "day": day, "other": pick(rng, [name for name in NAMES if name not in avoid])}
    lead = rng.choice(CONTEXT_BEFORE).format(**fill)
    if core.split(" ", 1)[0] in LOWERED_OPENINGS:
        core = core[0].lower() + core[1:]
    after = [s.format(**fill) for s in rng.sample(CONTEXT_AFTER, side_sentences)]
    return " ".join([f"{lead} {core}.", *after])


def generate(
    num_rows: int, seed: int, exclude: frozenset = frozenset(), side_sentences: tuple[int, ...] = SIDE_SENTENCES
) -> list[dict]:
    """``num_rows`` distinct pairs, balanced per family and label, none in ``exclude`` (premise, hypothesis);
    each premise gets a number of side sentences drawn from ``side_sentences``."""
    rng = random.Random(seed)
    rows, seen = [], set(exclude)
    names = list(FAMILIES)
    while len(rows) < num_rows:
        family = names[(len(rows) // 2) % len(names)]
        entailed = len(rows) % 2 == 0
        core, hypothesis = FAMILIES[family](rng, entailed)
        hypothesis = cap(hypothesis) + "."
        side = rng.choice(side_sentences)
        premise = with_context(core, rng, side, avoid=core + hypothesis)
        if (premise, hypothesis) in seen:
            continue
        seen.add((premise, hypothesis))
        label = "entailment" if entailed else "not_entailment"
        rows.append(
            {"sentence1": premise, "sentence2": hypothesis, "label": label, "family": family, "side_sentences": side}
        )
    rng.shuffle(rows)
    return rows


def write_jsonl(rows: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


if __name__ == "__main__":
    here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    here.mkdir(parents=True, exist_ok=True)
    # Train: 4,000 rows (cut 70/30 into train/validation like the cloud path; more distinct rows than
    # GLUE RTE's 2,490, as a 500-row subset was memorised without generalising).
    # Test: 4,000 held-out rows, so that the 95 % interval of an accuracy near 0.85 is about +-1.1 points
    # and a paired difference of 1.5 points between two models is well outside the noise.
    train = generate(4000, seed=7)
    write_jsonl(train, here / "train.jsonl")
    seen = frozenset((row["sentence1"], row["sentence2"]) for row in train)
    write_jsonl(generate(4000, seed=8, exclude=seen), here / "test.jsonl")
