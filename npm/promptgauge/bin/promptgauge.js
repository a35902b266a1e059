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

/**
 * Whether this process is in its terminal's foreground job (Linux: /proc/self/stat's
 * process group is the terminal's foreground group; elsewhere: stdin is a terminal). There,
 * the terminal's own signals (Ctrl-C, Ctrl-\, a resize) reach promptgauge directly, as they
 * reach every process of the job: passed on too, one Ctrl-C would arrive twice, and a
 * second Ctrl-C aborts.
 */
function inForegroundJob() {
  try {
    const stat = require("fs").readFileSync("/proc/self/stat", "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const [pgrp, tpgid] = [Number(fields[2]), Number(fields[5])];
    return tpgid > 0 && tpgid === pgrp;
  } catch {
    return Boolean(process.stdin.isTTY);
  }
}

// Every signal the launcher is sent is passed on, and the launcher waits for promptgauge
// to exit (it writes its reports, 130 after an interrupt) and exits as it did: nothing is
// swallowed (a CI cancel, `kill -INT`, `timeout -s INT`) and nothing orphaned (SIGQUIT).
// Only a terminal's own signals to the foreground job are not sent twice.
const fromTerminal = new Set(["SIGINT", "SIGQUIT", "SIGWINCH"]);
const forwarded = ["SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP", "SIGUSR2", "SIGALRM", "SIGWINCH"];
if (process.platform === "win32") {
  forwarded.splice(0, forwarded.length, "SIGINT", "SIGTERM", "SIGBREAK");
}
// Listening starts before the binary does, so no signal falls between; a listener runs
// once this script has ended, when `child` is set.
let child = null;
for (const signal of forwarded) {
  process.on(signal, () => {
    if (fromTerminal.has(signal) && inForegroundJob()) {
      return;
    }
    try {
      child.kill(signal);
    } catch {
      // Already gone: its exit ends the launcher.
    }
  });
}
child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
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
