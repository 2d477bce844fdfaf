"""Writes the shipped RTE-like sentence-pair files (run once; the JSONL files are committed).

Every premise states a small fact (who did what, where, when). A hypothesis is entailed when it restates
part of that fact, possibly paraphrased, and not entailed when it swaps an entity, negates the event or
claims something the premise does not say. Labels follow from the construction, so the task is learnable,
but the paraphrases and partial overlaps make it more than word matching.

    python training_code/nas/sample_data/generate_pairs.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

NAMES = [
    "Anna",
    "Ben",
    "Carla",
    "David",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemal",
    "Lena",
    "Marco",
    "Nadia",
    "Omar",
    "Priya",
    "Quentin",
    "Rosa",
    "Samir",
    "Tara",
    "Ugo",
    "Vera",
    "Wei",
    "Yusuf",
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
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
# (verb phrase in the past, paraphrase of it, an event it does not imply, noun)
EVENTS = [
    ("bought a new bicycle", "purchased a bicycle", "sold a bicycle", "bicycle"),
    ("sold an old car", "got rid of a car", "bought a car", "car"),
    ("wrote a long report", "finished writing a report", "lost a report", "report"),
    ("painted the kitchen", "gave the kitchen a new coat of paint", "cleaned the garage", "kitchen"),
    ("won a chess tournament", "came first in a chess competition", "lost a chess tournament", "tournament"),
    ("opened a small bakery", "started a bakery", "closed a bakery", "bakery"),
    ("repaired the roof", "fixed the roof", "damaged the roof", "roof"),
    ("adopted a young dog", "took in a dog", "gave away a dog", "dog"),
    ("visited the museum", "went to the museum", "avoided the museum", "museum"),
    ("planted three trees", "put some trees in the ground", "cut down three trees", "trees"),
    ("cooked dinner for friends", "made a meal for friends", "ate dinner alone", "dinner"),
    ("signed a new contract", "agreed to a contract", "cancelled a contract", "contract"),
]
OCCASIONS = ["after work", "in the morning", "despite the rain", "with a colleague", "for the first time"]


def _premise(rng: random.Random) -> dict:
    fact = {
        "name": rng.choice(NAMES),
        "city": rng.choice(CITIES),
        "day": rng.choice(DAYS),
        "event": rng.choice(EVENTS),
        "occasion": rng.choice(OCCASIONS),
    }
    fact["text"] = (
        f"On {fact['day']}, {fact['name']} {fact['event'][0]} in {fact['city']} {fact['occasion']}."
    )
    return fact


def _other(rng: random.Random, pool: list, current):
    return rng.choice([item for item in pool if item != current])


def _entailed(fact: dict, rng: random.Random) -> str:
    name, city, day, event = fact["name"], fact["city"], fact["day"], fact["event"]
    return rng.choice(
        [
            f"{name} {event[0]}.",
            f"{name} {event[1]}.",
            f"{name} was in {city} on {day}.",
            f"Someone {event[1]} in {city}.",
            f"On {day}, {name} {event[1]}.",
            f"{name} {event[0]} in {city}.",
        ]
    )


def _not_entailed(fact: dict, rng: random.Random) -> str:
    name, city, day, event = fact["name"], fact["city"], fact["day"], fact["event"]
    other_name, other_city = _other(rng, NAMES, name), _other(rng, CITIES, city)
    other_day, other_event = _other(rng, DAYS, day), _other(rng, EVENTS, event)
    return rng.choice(
        [
            f"{other_name} {event[0]}.",
            f"{name} {event[2]}.",
            f"{name} did not go to {city}.",
            f"{name} {event[0]} in {other_city}.",
            f"On {other_day}, {name} {event[1]}.",
            f"{name} {other_event[1]}.",
            f"{name} never {event[1].split(' ', 1)[0]} anything.",
        ]
    )


def generate(num_rows: int, seed: int, exclude: frozenset = frozenset()) -> list[dict]:
    """``num_rows`` distinct pairs, half of them entailed, none of them in ``exclude`` (premise, hypothesis)."""
    rng = random.Random(seed)
    rows, seen = [], set(exclude)
    while len(rows) < num_rows:
        fact = _premise(rng)
        entailed = len(rows) % 2 == 0
        hypothesis = _entailed(fact, rng) if entailed else _not_entailed(fact, rng)
        if (fact["text"], hypothesis) in seen:
            continue
        seen.add((fact["text"], hypothesis))
        rows.append(
            {
                "sentence1": fact["text"],
                "sentence2": hypothesis,
                "label": "entailment" if entailed else "not_entailment",
            }
        )
    rng.shuffle(rows)
    return rows


def write_jsonl(rows: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


if __name__ == "__main__":
    here = Path(__file__).parent
    # GLUE RTE's train size (2,490 rows, cut 70/30 into train/validation like the cloud path); a test split
    # of 1,000 rows so that one point of accuracy is 10 rows, not one or two.
    train = generate(2490, seed=7)
    write_jsonl(train, here / "train.jsonl")
    seen = frozenset((row["sentence1"], row["sentence2"]) for row in train)
    write_jsonl(generate(1000, seed=8, exclude=seen), here / "test.jsonl")
