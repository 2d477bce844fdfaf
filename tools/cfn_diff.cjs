#!/usr/bin/env node
// Diff many stack templates in one process with @aws-cdk/cloudformation-diff, the engine behind
// `cdk diff --template` (pinned in package.json). Reads a JSON request on stdin:
//   {"stacks": [{"name": "...", "base": "<template path or null>", "head": "<template path or null>",
//                "paths": {"<logicalId>": "<construct path>"}}]}
// and writes one JSON result on stdout: per stack, every resource difference with its change impact
// (WILL_REPLACE / MAY_REPLACE / WILL_DESTROY / WILL_ORPHAN / ...), the properties that cause it, the
// IAM and security-group summaries, and the CLI's own text rendering of the diff (no colours).
"use strict";

process.env.FORCE_COLOR = "0";
const fs = require("node:fs");
const { Writable } = require("node:stream");
const cfnDiff = require("@aws-cdk/cloudformation-diff");

const ANSI = /\u001b\[[0-9;]*m/g;

function readTemplate(path) {
  return path ? JSON.parse(fs.readFileSync(path, "utf8")) : {};
}

function render(fn) {
  const chunks = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  stream.columns = 120;
  fn(stream);
  return chunks.join("").replace(ANSI, "");
}

function clean(rows) {
  return rows.map((row) => row.map((cell) => String(cell).replace(ANSI, "")));
}

function resourceChanges(diff) {
  const out = [];
  diff.resources.forEachDifference((logicalId, change) => {
    const properties = {};
    for (const [name, prop] of Object.entries(change.propertyUpdates)) {
      properties[name] = prop.changeImpact || null;
    }
    out.push({
      logicalId,
      type: change.resourceTypeChanged
        ? `${change.oldResourceType} -> ${change.newResourceType}`
        : change.resourceType,
      impact: change.changeImpact,
      isAddition: change.isAddition,
      isRemoval: change.isRemoval,
      properties,
      other: Object.keys(change.otherChanges).sort(),
    });
  });
  out.sort((a, b) => (a.logicalId < b.logicalId ? -1 : a.logicalId > b.logicalId ? 1 : 0));
  return out;
}

function main() {
  const request = JSON.parse(fs.readFileSync(0, "utf8"));
  const results = [];
  for (const stack of request.stacks) {
    const diff = cfnDiff.fullDiff(readTemplate(stack.base), readTemplate(stack.head));
    const paths = stack.paths || {};
    results.push({
      name: stack.name,
      empty: diff.isEmpty,
      resources: resourceChanges(diff),
      otherSections: ["parameters", "outputs", "conditions", "mappings", "metadata"].filter(
        (section) => diff[section] && diff[section].differenceCount > 0,
      ),
      iam: {
        changed: diff.iamChanges.hasChanges,
        broadened: diff.iamChanges.permissionsBroadened,
        statements: clean(diff.iamChanges.summarizeStatements()),
        managedPolicies: clean(diff.iamChanges.summarizeManagedPolicies()),
      },
      securityGroups: {
        changed: diff.securityGroupChanges.hasChanges,
        rules: clean(diff.securityGroupChanges.summarize()),
      },
      text: diff.isEmpty ? "" : render((s) => cfnDiff.formatDifferences(s, diff, paths)),
    });
  }
  process.stdout.write(JSON.stringify({ engine: engineVersion(), stacks: results }));
}

function engineVersion() {
  const pkg = require("@aws-cdk/cloudformation-diff/package.json");
  return `${pkg.name}@${pkg.version}`;
}

main();
