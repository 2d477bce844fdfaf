"""Run a guide's shell commands, as written, against the emulator.

The commands come from the guide's ```bash blocks. `aws <service> <operation> --flag value ...` becomes the
boto3 call the AWS CLI makes: flags map to the operation's input members through botocore's own model (the CLI's
rule: each member name in kebab case), values take the member's type, `--query` is JMESPath over the answer and
`--output text` prints it bare. `aws s3 cp` and the make/npx commands are handed to the test's own actions,
keyed by their leading words, so a command in the guide that no action knows fails the test instead of being
skipped. `NAME=$(...)` assignments and `$NAME` references work as in the shell.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import jmespath
from botocore import xform_name

FENCE = re.compile(r"^\s*```bash\n(.*?)^\s*```", re.MULTILINE | re.DOTALL)
ASSIGNMENT = re.compile(r"^(?P<name>[A-Z_]+)=\$\((?P<command>.*)\)$")


def section(markdown: str, heading: str) -> str:
    """The text under `## heading`, up to the next `## `."""
    start = markdown.index(f"\n## {heading}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end != -1 else len(markdown)]


def command_lines(markdown: str) -> Iterator[str]:
    """Each logical command of the ```bash blocks: continuations joined, comments and blank lines dropped."""
    for block in FENCE.findall(markdown):
        for line in block.replace("\\\n", " ").splitlines():
            text = line.strip()
            if re.match(r"[A-Z_]+=\$\(", text):  # `NAME=$(...)  # note`: shlex would split the $( ... )
                yield text[: text.rindex(")") + 1]
            elif words := shlex.split(text, comments=True):
                yield shlex.join(words)


@dataclass
class GuideRunner:
    """Runs each command against `aws` (a boto3 client factory), with `actions` for the non-AWS-CLI ones."""

    client: Callable[[str], object]
    actions: dict[str, Callable[[list[str]], str | None]]
    variables: dict[str, str] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)

    def run(self, line: str) -> str | None:
        assignment = ASSIGNMENT.match(line)
        command = assignment["command"] if assignment else line
        words = [self._expand(word) for word in shlex.split(command)]
        result = self._dispatch(words)
        if assignment:
            assert result, f"{line}: printed nothing to assign"
            self.variables[assignment["name"]] = result
        self.ran.append(line)
        return result

    def _expand(self, word: str) -> str:
        def value(match: re.Match) -> str:
            assert match[1] in self.variables, f"${match[1]} is used before the guide sets it"
            return self.variables[match[1]]

        return re.sub(r"\$([A-Z_]+)", value, word)

    def _dispatch(self, words: list[str]) -> str | None:
        for prefix, action in sorted(self.actions.items(), key=lambda item: -len(item[0])):
            if words[: len(prefix.split())] == prefix.split():
                return action(words)
        assert words[0] == "aws", f"no action for the guide's command {shlex.join(words)!r}"
        return self.aws_cli(words[1:])

    def aws_cli(self, words: list[str]) -> str:
        """`<service> <operation> --flag value ...` as the AWS CLI sends it."""
        service, operation, *flags = words
        client = self.client(service)
        model = client.meta.service_model.operation_model(_operation_name(client, operation))
        params, query, output = _parameters(model, flags)
        answer = getattr(client, xform_name(model.name))(**params)
        answer.pop("ResponseMetadata", None)
        selected = jmespath.search(query, answer) if query else answer
        if output == "text":
            return selected if isinstance(selected, str) else " ".join(map(str, selected))
        return json.dumps(selected, default=str)


def _operation_name(client, cli_name: str) -> str:
    for name in client.meta.service_model.operation_names:
        if xform_name(name, "-") == cli_name:
            return name
    raise AssertionError(f"{client.meta.service_model.service_name} has no operation {cli_name}")


def _parameters(model, flags: list[str]) -> tuple[dict, str | None, str]:
    """Input members from `--kebab-name value` pairs, typed by the input shape; --query and --output apart."""
    members = model.input_shape.members
    by_flag = {xform_name(name, "-"): name for name in members}
    params, query, output = {}, None, "json"
    pairs = iter(flags)
    for flag in pairs:
        value = next(pairs)
        name = flag.removeprefix("--")
        if name == "query":
            query = value
        elif name == "output":
            output = value
        else:
            assert name in by_flag, f"{model.name} takes no --{name} (botocore: {sorted(by_flag)})"
            member = by_flag[name]
            params[member] = _typed(members[member].type_name, value)
    return params, query, output


def _typed(type_name: str, value: str):
    if type_name in ("integer", "long"):
        return int(value)
    if type_name == "boolean":
        return value == "true"
    if type_name in ("map", "structure", "list"):  # the CLI takes JSON for these
        return json.loads(value)
    return value
