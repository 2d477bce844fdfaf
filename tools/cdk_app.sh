#!/bin/sh
# cdk.json's "app": run app.py with the lean synth env (.venv-app, `make app-deps`) or, failing that, the full
# test env (.venv, `make deps`), so `npx cdk synth|diff|deploy` work with either install. Both synthesize the
# same templates (the same requirements.txt pins). Run from the project root, where the CLI runs the app.
cd "$(dirname "$0")/.." || exit 1
for python in .venv-app/bin/python .venv/bin/python; do
  if [ -x "$python" ]; then
    exec "$python" app.py "$@"
  fi
done
echo "cdk app: neither .venv-app/bin/python nor .venv/bin/python exists; run make app-deps (synth only) or make deps" >&2
exit 1
