// Preloaded into the jsii kernel's node by app.py (NODE_OPTIONS --require; see kernel_node_options there).
// V8 flags are not allowed in NODE_OPTIONS, so this sets one before any module runs: WebAssembly stays on
// Liftoff, V8's baseline compiler (same semantics). aws-cdk-lib's template validator is WebAssembly; V8 tiers its
// hottest function up to TurboFan on a background thread, and node's exit waited ~1.1 s for that compile to end.
require("v8").setFlagsFromString("--liftoff-only");
