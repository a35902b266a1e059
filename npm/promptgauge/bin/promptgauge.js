#!/usr/bin/env node
// `promptgauge` from npm: runs the binary that this platform's optional dependency
// (@promptgauge/<os>-<cpu>, or <os>-<cpu>-musl) carries. npm installs only the one whose
// `os`, `cpu` and `libc` match, so nothing is downloaded after install (the pattern esbuild
// and Biome use). docs/guide/install.md, "With npm".
"use strict";

const { spawn } = require("child_process");

/** Whether this Linux runs on musl (Alpine), whose binary is a package of its own. */
function isMusl() {
  if (process.platform !== "linux") {
    return false;
  }
  try {
    const report = process.report && process.report.getReport();
    return !(report && report.header && report.header.glibcVersionRuntime);
  } catch {
    return false;
  }
}

const pkg = `@promptgauge/${process.platform}-${process.arch}${isMusl() ? "-musl" : ""}`;
let binary;
try {
  binary = require.resolve(`${pkg}/bin/promptgauge`);
} catch {
  console.error(
    `promptgauge: ${pkg} is not installed, so there is no binary for ${process.platform} ${process.arch}.\n` +
      "fix: reinstall without --no-optional / --omit=optional; if this platform has no package, " +
      "install another way (docs/guide/install.md: cargo, pip, Docker, a release binary)",
  );
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
// Ctrl-C reaches promptgauge itself (the terminal signals the whole process group): the
// launcher waits while it stops, writes its reports and exits 130, as it would alone. A
// signal sent to the launcher only (a CI runner's SIGTERM) is passed on.
process.on("SIGINT", () => {});
for (const signal of ["SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (e) => {
  console.error(`promptgauge: cannot run ${binary}: ${e.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code === null ? 1 : code);
  }
});
