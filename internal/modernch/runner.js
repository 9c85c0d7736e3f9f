// Runs statements on a chDB session (a current ClickHouse engine, in
// process) kept in the directory given as the only argument. Requests
// come one JSON object a line on stdin and are answered in order, one
// JSON object a line on stdout:
//
//   {"sql": "...", "format": "JSONCompact"}          -> {"ok": true, "text": "..."}
//   {"sql": "..."}                                   -> {"ok": true, "text": ""}
//   {"insert": "db.table", "columns": [...],
//    "format": "JSONEachRow", "data": "..."}         -> {"ok": true, "rows": n}
//
// A failure answers {"ok": false, "code": n, "error": "..."}, where code is
// the server's error code (0 when the message has none). The process ends
// when stdin closes.
"use strict";

const readline = require("node:readline");
const { Session } = require("chdb");

const dir = process.argv[2];
if (!dir) {
  process.stderr.write("usage: node runner.js DATA_DIR\n");
  process.exit(2);
}
// An optional second argument is a configuration file for the engine
// (clusters, for Distributed tables).
const config = process.argv[3];
const session = config ? new Session(dir, { connectionArgs: ["--config-file=" + config] }) : new Session(dir);

function answer(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function failure(err) {
  const message = String((err && err.message) || err);
  const m = /Code: (\d+)\./.exec(message);
  return { ok: false, code: m ? Number(m[1]) : 0, error: message };
}

async function handle(req) {
  if (req.insert) {
    const r = await session.insert({ table: req.insert, columns: req.columns, format: req.format, values: Buffer.from(req.data) });
    return { ok: true, rows: r.rowsSent };
  }
  const text = req.format ? session.query(req.sql, req.format) : session.query(req.sql);
  return { ok: true, text: text || "" };
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
let queue = Promise.resolve();
lines.on("line", (line) => {
  queue = queue.then(async () => {
    let req;
    try {
      req = JSON.parse(line);
    } catch (err) {
      answer({ ok: false, code: 0, error: "request is not JSON: " + err.message });
      return;
    }
    try {
      answer(await handle(req));
    } catch (err) {
      answer(failure(err));
    }
  });
});
lines.on("close", () => {
  queue.then(() => session.close());
});
