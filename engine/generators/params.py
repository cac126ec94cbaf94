"""Typed parameters of the topology generators, readable from text (CLI, dialog fields).

Each :class:`ParamSpec` says what one parameter is: its name, type, default, help text,
allowed choices and bounds, and when it matters (``relevant_when``), so that
``canopy generate`` and the GUI's generator dialog can both be built from the registry
without knowing any generator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from canopy.engine.model.errors import CanopyError
from canopy.engine.model.topology import format_number, parse_bandwidth
from canopy.engine.model.units import GBPS, from_gbps, split_unit, to_gbps

# Parameter types. Values are Python objects of the listed kind.
INT = "int"                  # int
BANDWIDTH = "bandwidth"      # Fraction > 0, GB/s
BANDWIDTHS = "bandwidths"    # tuple[Fraction, ...], comma-separated: "200,100,50"
RATIO = "ratio"              # Fraction >= 0 ("1", "2", "1/2", "1.5"); 0 only if minimum=0
DIMS = "dims"                # tuple[int, ...]: "4x4x4"
CHOICE = "choice"            # str, one of ``choices``
CHOICES = "choices"          # tuple[str, ...], comma-separated, each one of ``choices``
BOOL = "bool"                # bool: yes/no, true/false, on/off, 1/0
PARAM_TYPES = (INT, BANDWIDTH, BANDWIDTHS, RATIO, DIMS, CHOICE, CHOICES, BOOL)

_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n"}


class ParameterError(CanopyError):
    """A generator parameter with a value that cannot be used."""


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a generator.

    ``relevant_when`` tells from all parameters' values whether this one matters (a
    dialog greys it out otherwise); ``minimum``/``maximum`` bound ints and every entry
    of dims; a ratio may be 0 only when ``minimum`` is 0.
    """

    name: str
    type: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    relevant_when: Callable[[Mapping[str, Any]], bool] | None = None

    @property
    def flag(self) -> str:
        """The command-line option: ``--nics-per-gpu`` for ``nics_per_gpu``."""
        return "--" + self.name.replace("_", "-")

    @property
    def label(self) -> str:
        """A human label for dialogs: ``nics_per_gpu`` -> ``NICs per GPU``."""
        words = [_LABEL_WORDS.get(w, w) for w in self.name.split("_")]
        text = " ".join(words)
        return text[0].upper() + text[1:]

    def parse(self, text: str | Any, unit: str = GBPS) -> Any:
        """Turn ``text`` (or an already typed value) into this parameter's value; a
        bandwidth may carry a unit (``400Gb/s``) and is then converted to ``unit``."""
        value = _convert(self, text, unit)
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        """Raise ParameterError if ``value`` is out of bounds or not among the choices."""
        if self.type == INT:
            self._check_int(value, f"{self.flag} is {value}")
        elif self.type == DIMS:
            for d in value:
                self._check_int(d, f"{self.flag} has a dimension of {d}")
        elif self.type == RATIO and value == 0 and self.minimum != 0:
            raise ParameterError(f"{self.flag} is 0; it must be positive.")
        elif self.type == CHOICE and value not in self.choices:
            raise ParameterError(f"{self.flag} is '{value}'; choose one of "
                                 f"{', '.join(self.choices)}.")
        elif self.type == CHOICES:
            for v in value:
                if v not in self.choices:
                    raise ParameterError(f"{self.flag} has '{v}'; each entry must be one of "
                                         f"{', '.join(self.choices)}.")

    def _check_int(self, value: int, what: str) -> None:
        if self.minimum is not None and value < self.minimum:
            raise ParameterError(f"{what}; it must be at least {self.minimum}.")
        if self.maximum is not None and value > self.maximum:
            raise ParameterError(f"{what}; it must be at most {self.maximum}.")

    def format(self, value: Any) -> str:
        """The text form of ``value`` that :meth:`parse` reads back."""
        if self.type in (BANDWIDTH, RATIO):
            return str(format_number(value))
        if self.type == BANDWIDTHS:
            return ",".join(str(format_number(v)) for v in value)
        if self.type == DIMS:
            return "x".join(str(d) for d in value)
        if self.type == CHOICES:
            return ",".join(value)
        if self.type == BOOL:
            return "yes" if value else "no"
        return str(value)

    def is_relevant(self, values: Mapping[str, Any]) -> bool:
        """Whether this parameter matters given the other parameters' ``values``."""
        return self.relevant_when is None or bool(self.relevant_when(values))


_LABEL_WORDS = {"gpus": "GPUs", "gpu": "GPU", "nics": "NICs", "nic": "NIC", "bw": "bandwidth",
                "pcie": "PCIe", "fc": "FC"}


def _convert(spec: ParamSpec, raw: Any, unit: str = GBPS) -> Any:
    """Parse text for ``spec``; typed values (from code or the dialog) pass through."""
    where = spec.flag
    if not isinstance(raw, str):
        return _convert_typed(spec, raw, unit)
    text = raw.strip()
    if spec.type == INT:
        if not re.fullmatch(r"[+-]?\d+", text):
            raise ParameterError(f"{where} is '{raw}', which is not a whole number.")
        return int(text)
    if spec.type == BANDWIDTH:
        return _bandwidth(text, where, unit)
    if spec.type == BANDWIDTHS:
        parts = [p for p in re.split(r"\s*,\s*|\s+(?!Gi?[Bb]/s)", text) if p.strip()]
        if not parts:
            raise ParameterError(f"{where} is empty; give one or more bandwidths like 200,100.")
        return tuple(_bandwidth(p, where, unit) for p in parts)
    if spec.type == RATIO:
        return _ratio(text, where)
    if spec.type == DIMS:
        if not re.fullmatch(r"\d+(\s*[x×*,]\s*\d+)*", text.lower()):
            raise ParameterError(f"{where} is '{raw}'; give sizes like 4x4x4.")
        return tuple(int(p) for p in re.split(r"\s*[x×*,]\s*", text.lower()))
    if spec.type == CHOICE:
        return text.lower()
    if spec.type == CHOICES:
        parts = [p.lower() for p in re.split(r"[,\s]+", text) if p]
        if not parts:
            raise ParameterError(f"{where} is empty; give entries like "
                                 f"{','.join(spec.choices[:2])}.")
        return tuple(parts)
    if spec.type == BOOL:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ParameterError(f"{where} is '{raw}'; use yes or no.")
    raise ValueError(f"unknown parameter type {spec.type!r}")


def _convert_typed(spec: ParamSpec, value: Any, unit: str = GBPS) -> Any:
    where = spec.flag
    if spec.type == INT and isinstance(value, int) and not isinstance(value, bool):
        return value
    if spec.type == BANDWIDTH and isinstance(value, (int, Fraction)) \
            and not isinstance(value, bool):
        return _bandwidth(value, where, unit)
    if spec.type == RATIO and isinstance(value, (int, Fraction)) and not isinstance(value, bool):
        return _ratio(value, where)
    if spec.type == BANDWIDTHS and isinstance(value, (list, tuple)) and value:
        return tuple(_bandwidth(v, where, unit) for v in value)
    if spec.type == DIMS and isinstance(value, (list, tuple)) and value \
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    if spec.type == CHOICES and isinstance(value, (list, tuple)) and value:
        return tuple(str(v).lower() for v in value)
    if spec.type == BOOL and isinstance(value, bool):
        return value
    return _convert(spec, str(value), unit)


def _bandwidth(value: Any, where: str, unit: str = GBPS) -> Fraction:
    """A positive exact bandwidth in ``unit``; text may name its own unit (``400Gb/s``,
    ``50 GB/s``), converted exactly (:mod:`canopy.engine.model.units`)."""
    number, given = "", None
    if isinstance(value, str):
        number, given = split_unit(value)
    try:
        result = parse_bandwidth(number if given else value)
    except ValueError as exc:
        raise ParameterError(f"{where} is '{value.strip() if isinstance(value, str) else value}'"
                             f", which {exc}; give a number in {unit} or one with its unit, "
                             "e.g. 400Gb/s.") from None
    return from_gbps(to_gbps(result, given), unit) if given else result


def _ratio(value: Any, where: str) -> Fraction:
    """A non-negative exact ratio (0 is checked against the spec's minimum later)."""
    if value == 0 or (isinstance(value, str) and re.fullmatch(r"0+(\.0*)?", value)):
        return Fraction(0)
    try:
        return parse_bandwidth(value)
    except ValueError as exc:
        raise ParameterError(f"{where} is '{value}', which {exc}.") from None
