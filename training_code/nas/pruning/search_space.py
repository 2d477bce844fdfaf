"""Search spaces of sub-networks of a BERT-style encoder (standard library only).

The CDK stacks import this module at synth time, without torch, to build the tuning job's
``ParameterRanges``; ``evaluate_subnetwork.py`` parses the same names back. Ranges are defined once here.

A sub-network keeps a prefix of the layers, and in every kept layer a prefix of its attention heads and a
prefix of its FFN units. 0 heads or 0 units are allowed: the block's weights go away, its output bias and
LayerNorm stay (which is what the physically pruned model computes too).

Spaces:
- ``uniform`` (the seed's space): ``num_layers`` 0..L, ``num_heads`` an *ordinal* choice among the
  divisors of the head count (1, 2, 3, 4, 6, 12 for 12 heads: the seed's {1, 3, 6, 12} steps and the two
  between), ``num_units`` 0..intermediate size, the same for every kept layer. Ordinal means the searcher
  mutates heads to a neighbouring value; SageMaker has no ordinal type, so there it is categorical.
- ``per_layer``: ``num_layers`` 0..L and, for each layer i, ``num_heads_<i>`` 0..H and
  ``num_units_<i>`` 0..intermediate size (values of dropped layers are ignored).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SPACES = ("uniform", "per_layer")


@dataclass(frozen=True)
class ModelDims:
    """The dimensions of the super-network that a search space depends on."""

    num_layers: int
    num_heads: int
    intermediate_size: int

    @classmethod
    def from_config(cls, config: dict) -> ModelDims:
        """From a Hugging Face ``config.json`` dict (BERT key names)."""
        return cls(config["num_hidden_layers"], config["num_attention_heads"], config["intermediate_size"])


def check_model_dims(expected: ModelDims, config: dict) -> None:
    """Raises ValueError naming every dimension where ``expected`` (e.g. typed into a stack's config)
    differs from the model's ``config.json``; the tuning job's ranges would otherwise be wrong."""
    actual = ModelDims.from_config(config)
    wrong = [
        f"{name} is {getattr(expected, name)}, the model's config.json says {getattr(actual, name)}"
        for name in ("num_layers", "num_heads", "intermediate_size")
        if getattr(expected, name) != getattr(actual, name)
    ]
    if wrong:
        raise ValueError("; ".join(wrong))


@dataclass(frozen=True)
class SubnetConfig:
    """Heads and FFN units kept in each kept layer; ``len(heads)`` is the number of kept layers."""

    heads: tuple[int, ...]
    units: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.heads) != len(self.units):
            raise ValueError(f"heads {self.heads} and units {self.units} differ in length")

    @property
    def num_layers(self) -> int:
        return len(self.heads)

    def to_dict(self) -> dict:
        return {"heads": list(self.heads), "units": list(self.units)}

    @classmethod
    def from_dict(cls, data: dict) -> SubnetConfig:
        return cls(tuple(int(h) for h in data["heads"]), tuple(int(u) for u in data["units"]))

    def validate(self, dims: ModelDims) -> None:
        if self.num_layers > dims.num_layers:
            raise ValueError(f"{self.num_layers} layers kept, the model has {dims.num_layers}")
        for h, u in zip(self.heads, self.units, strict=True):
            if not 0 <= h <= dims.num_heads:
                raise ValueError(f"num_heads {h} outside 0..{dims.num_heads}")
            if not 0 <= u <= dims.intermediate_size:
                raise ValueError(f"num_units {u} outside 0..{dims.intermediate_size}")


@dataclass(frozen=True)
class ParamSpec:
    """One hyperparameter: an integer range or an ordered set of integers (``choices``, ascending)."""

    name: str
    low: int = 0
    high: int = 0
    choices: tuple[int, ...] = ()

    @property
    def is_categorical(self) -> bool:
        return bool(self.choices)

    def sample(self, rng: random.Random) -> int:
        return rng.choice(self.choices) if self.choices else rng.randint(self.low, self.high)

    def minimum(self) -> int:
        return min(self.choices) if self.choices else self.low


def head_divisors(num_heads: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, num_heads + 1) if num_heads % d == 0)


def parameter_specs(space: str, dims: ModelDims) -> list[ParamSpec]:
    """The hyperparameters of ``space``, in a form both SageMaker and Syne Tune ranges derive from."""
    layers = ParamSpec("num_layers", 0, dims.num_layers)
    if space == "uniform":
        return [
            layers,
            ParamSpec("num_heads", choices=head_divisors(dims.num_heads)),
            ParamSpec("num_units", 0, dims.intermediate_size),
        ]
    if space == "per_layer":
        specs = [layers]
        for i in range(dims.num_layers):
            specs.append(ParamSpec(f"num_heads_{i}", 0, dims.num_heads))
            specs.append(ParamSpec(f"num_units_{i}", 0, dims.intermediate_size))
        return specs
    raise ValueError(f"unknown search space {space!r}; expected one of {SPACES}")


def sagemaker_parameter_ranges(space: str, num_layers: int, num_heads: int, intermediate_size: int) -> dict:
    """``ParameterRanges`` of CreateHyperParameterTuningJob; names are ``evaluate_subnetwork.py`` flags."""
    integer, categorical = [], []
    for spec in parameter_specs(space, ModelDims(num_layers, num_heads, intermediate_size)):
        if spec.is_categorical:
            categorical.append({"Name": spec.name, "Values": [str(c) for c in spec.choices]})
        else:
            integer.append(
                {
                    "Name": spec.name,
                    "MinValue": str(spec.low),
                    "MaxValue": str(spec.high),
                    "ScalingType": "Auto",
                }
            )
    ranges: dict = {"IntegerParameterRanges": integer}
    if categorical:
        ranges["CategoricalParameterRanges"] = categorical
    return ranges


def config_from_hyperparameters(space: str, values: dict, dims: ModelDims) -> SubnetConfig:
    """Builds a sub-network from hyperparameter values (ints or the strings SageMaker passes)."""
    names = [s.name for s in parameter_specs(space, dims)]
    missing = [n for n in names if n not in values]
    if missing:
        raise ValueError(f"missing hyperparameters for space {space!r}: {missing}")
    num_layers = int(values["num_layers"])
    if space == "uniform":
        heads = (int(values["num_heads"]),) * num_layers
        units = (int(values["num_units"]),) * num_layers
    else:
        heads = tuple(int(values[f"num_heads_{i}"]) for i in range(num_layers))
        units = tuple(int(values[f"num_units_{i}"]) for i in range(num_layers))
    config = SubnetConfig(heads, units)
    config.validate(dims)
    return config


def sample_hyperparameters(space: str, dims: ModelDims, rng: random.Random) -> dict:
    return {s.name: s.sample(rng) for s in parameter_specs(space, dims)}


def sample_config(space: str, dims: ModelDims, rng: random.Random) -> SubnetConfig:
    return config_from_hyperparameters(space, sample_hyperparameters(space, dims, rng), dims)


def largest_config(dims: ModelDims) -> SubnetConfig:
    return SubnetConfig((dims.num_heads,) * dims.num_layers, (dims.intermediate_size,) * dims.num_layers)


def smallest_config(space: str, dims: ModelDims) -> SubnetConfig:
    values = {s.name: s.minimum() for s in parameter_specs(space, dims)}
    return config_from_hyperparameters(space, values, dims)
