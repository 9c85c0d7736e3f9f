// The live events page: reads GET /cms/app/events/live with the token in
// the Authorization header (never in an address, so no log, history or
// Referer holds it) and draws each event as a row. Everything an event
// holds is text: it is put into the page with textContent only.
"use strict";

const maxRows = 500;
const $ = (id) => document.getElementById(id);
let abort = null; // the running stream's AbortController
let paused = false;
let waiting = []; // events that arrived while paused, oldest first
let droppedWhilePaused = 0;

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text;
  s.className = "status" + (kind ? " " + kind : "");
}

function streamURL() {
  const q = new URLSearchParams();
  const add = (name, id) => { const v = $(id).value.trim(); if (v) q.set(name, v); };
  add("appId", "app");
  add("type", "type");
  add("name", "name");
  add("sessionId", "session");
  add("userId", "user");
  if ($("quarantined").checked) q.set("quarantined", "true");
  const s = q.toString();
  return "/cms/app/events/live" + (s ? "?" + s : "");
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text || "";
  if (text) td.title = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function timeOf(iso) {
  const m = /T(\d\d:\d\d:\d\d(?:\.\d+)?)/.exec(iso || "");
  return m ? m[1] : (iso || "");
}

function detail(td, ev) {
  if (ev.reasons && ev.reasons.length) {
    const ul = document.createElement("ul");
    ul.className = "reasons";
    for (const r of ev.reasons) {
      const li = document.createElement("li");
      const code = document.createElement("code");
      code.textContent = r.field || "(the event)";
      li.appendChild(code);
      li.appendChild(document.createTextNode(" " + r.reason + ": " + r.message));
      ul.appendChild(li);
    }
    td.appendChild(ul);
  }
  const body = ev.payload !== undefined ? ev.payload : ev.sent;
  if (body === undefined) return;
  const cut = ev.payload !== undefined ? ev.payloadCut : ev.sentCut;
  const size = ev.payload !== undefined ? ev.payloadBytes : ev.sentBytes;
  const text = cut ? body : JSON.stringify(body);
  const pre = document.createElement("pre");
  pre.className = "payload";
  pre.textContent = (ev.payload === undefined ? "sent: " : "") + text;
  const d = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = (ev.payload !== undefined ? "payload" : "as sent") + (cut ? " (first bytes of " + size + ")" : "");
  if (cut) summary.className = "cut";
  d.appendChild(summary);
  d.appendChild(pre);
  td.appendChild(d);
}

function draw(ev) {
  const tr = document.createElement("tr");
  tr.dataset.eventId = ev.eventId;
  tr.dataset.status = ev.status;
  if (ev.status === "quarantined") tr.className = "quarantined";
  cell(tr, timeOf(ev.receivedAt)).title = ev.receivedAt;
  cell(tr, ev.status, "status");
  cell(tr, ev.type);
  cell(tr, ev.name);
  cell(tr, ev.sessionId);
  cell(tr, ev.userId);
  cell(tr, ev.channel);
  cell(tr, ev.platform);
  cell(tr, ev.selectedHandler);
  cell(tr, timeOf(ev.runtimeTime)).title = ev.runtimeTime || "";
  detail(cell(tr, "", "detail"), ev);
  const rows = $("rows");
  rows.insertBefore(tr, rows.firstChild);
  while (rows.childNodes.length > maxRows) rows.removeChild(rows.lastChild);
}

function onEvent(ev) {
  if (!paused) {
    draw(ev);
    return;
  }
  waiting.push(ev);
  if (waiting.length > maxRows) {
    waiting.shift();
    droppedWhilePaused++;
  }
  $("pause").textContent = "Resume (" + waiting.length + " waiting)";
}

function counts(s) {
  const t = s.total;
  let text = "Last " + s.seconds + " s: " + s.seen + " seen, " + s.shown + " shown, " + s.skipped +
    " skipped over the rate. Since Watch: " + t.seen + " seen, " + t.shown + " shown, " + t.skipped + " skipped.";
  if (t.unread > 0) {
    text += " More was published than the view reads: " + t.unread +
      " events of all apps passed over unread since Watch, so these are a sample.";
  }
  $("counts").textContent = text;
}

function handle(kind, data) {
  let v;
  try {
    v = JSON.parse(data);
  } catch (e) {
    return;
  }
  switch (kind) {
    case "start":
      setStatus("Connected to " + v.appId + ": at most " + v.eventsPerSecond + " events a second, payloads shown up to " +
        v.payloadBytes + " bytes. Waiting for Kafka…");
      break;
    case "state":
      setStatus(v.message, v.state === "interrupted" ? "interrupted" : "");
      break;
    case "event":
      onEvent(v);
      break;
    case "summary":
      counts(v);
      break;
    case "end":
      setStatus("Stream ended (" + v.reason + "): " + v.message, v.reason === "limit" ? "" : "problem");
      break;
  }
}

// parse takes the text received so far and handles each complete message,
// returning what is left of an incomplete one.
function parse(buf) {
  buf = buf.replace(/\r\n?/g, "\n");
  let i;
  while ((i = buf.indexOf("\n\n")) >= 0) {
    const block = buf.slice(0, i);
    buf = buf.slice(i + 2);
    let kind = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const c = line.indexOf(":");
      const field = c < 0 ? line : line.slice(0, c);
      let value = c < 0 ? "" : line.slice(c + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") kind = value;
      if (field === "data") data.push(value);
    }
    if (data.length) handle(kind, data.join("\n"));
  }
  return buf;
}

function running(on) {
  $("start").disabled = on;
  $("stop").disabled = !on;
  $("pause").disabled = !on;
}

async function watch() {
  const token = $("token").value.trim();
  if (!token) {
    setStatus("Paste a token first.", "problem");
    return;
  }
  stop();
  const ctl = new AbortController();
  abort = ctl;
  running(true);
  setStatus("Connecting…");
  try {
    const res = await fetch(streamURL(), {
      headers: { "Authorization": "Bearer " + token, "Accept": "text/event-stream" },
      cache: "no-store",
      signal: ctl.signal,
    });
    if (!res.ok) {
      let msg = res.statusText;
      try {
        msg = (await res.json()).message || msg;
      } catch (e) { /* not the JSON error shape */ }
      setStatus(res.status + ": " + msg, "problem");
      running(false);
      return;
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf = parse(buf + decoder.decode(value, { stream: true }));
    }
    if (abort === ctl && !$("status").classList.contains("problem") && !/^Stream ended/.test($("status").textContent)) {
      setStatus("The connection ended. Press Watch to connect again.", "problem");
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
    setStatus("The connection failed: " + e.message, "problem");
  }
  if (abort === ctl) {
    abort = null;
    running(false);
  }
}

function stop() {
  if (abort) {
    const ctl = abort;
    abort = null;
    ctl.abort();
    setStatus("Stopped.");
  }
  running(false);
}

function togglePause() {
  paused = !paused;
  if (!paused) {
    for (const ev of waiting) draw(ev);
    waiting = [];
    droppedWhilePaused = 0;
  }
  $("pause").textContent = paused ? "Resume (" + waiting.length + " waiting)" : "Pause";
}

document.addEventListener("DOMContentLoaded", () => {
  $("watch").addEventListener("submit", (e) => { e.preventDefault(); watch(); });
  $("stop").addEventListener("click", stop);
  $("pause").addEventListener("click", togglePause);
  $("clear").addEventListener("click", () => { $("rows").textContent = ""; $("counts").textContent = ""; });
});
