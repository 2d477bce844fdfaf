// Preloaded into the jsii kernel's node (NODE_OPTIONS --require; see stacks/jsii_kernel.py).
// V8 flags are not allowed in NODE_OPTIONS, so this sets one before any module runs: WebAssembly stays on
// Liftoff, V8's baseline compiler (same semantics). aws-cdk-lib's template validator is WebAssembly; V8 tiers its
// hottest function up to TurboFan on a background thread, and node's exit waited ~1.1 s for that compile to end.
require("v8").setFlagsFromString("--liftoff-only");
// Node 24's V8 reads its WebAssembly tiering flags only at start-up, so the line above no longer acts in a running
// process. The jsii runtime runs the kernel in a child it starts with this process's execArgv (jsii-runtime.js:
// spawn(process.execPath, [...process.execArgv, ..., program.js])): the flag goes there, on the child's command line.
if (!process.execArgv.includes("--liftoff-only")) process.execArgv.push("--liftoff-only");
