// The authors' analytics page: reads the app's report, gap inbox,
// sessions and conversations with the token in the Authorization header
// (never in an address, so no log, history or Referer holds it), and acts
// on a group through GraphQL with the same token. Everything users asked
// is text: it is put into the page with textContent only, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
let days = 30;
let conversation = null; // {session, offset}

function setStatus(text, problem) {
  const s = $("status");
  s.textContent = text;
  s.className = "status" + (problem ? " problem" : "");
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function withApp(path, params) {
  const q = new URLSearchParams(params);
  const app = $("app").value.trim();
  if (app) q.set("appId", app);
  return path + "?" + q.toString();
}

async function call(path, params) {
  const r = await fetch(withApp(path, params), { headers: { Authorization: "Bearer " + $("token").value.trim() } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((body.message || r.statusText) + " (" + r.status + ")");
  return body;
}

async function graphql(query, variables) {
  const app = $("app").value.trim();
  if (app) variables = Object.assign({ appId: app }, variables);
  const r = await fetch("/cms/graphql", {
    method: "POST",
    headers: { Authorization: "Bearer " + $("token").value.trim(), "Content-Type": "application/json" },
    body: JSON.stringify({ query, variables }),
  });
  const body = await r.json().catch(() => ({}));
  if (body.errors && body.errors.length) throw new Error(body.errors.map((e) => e.message).join("; "));
  if (!r.ok) throw new Error(r.statusText + " (" + r.status + ")");
  return body.data;
}

const pct = (x) => (100 * x).toFixed(1) + "%";
const day = (iso) => (iso || "").slice(0, 10);
const clock = (iso) => (iso || "").replace("T", " ").slice(0, 16);

function drawOverview(rep) {
  $("range").textContent = rep.from + " to " + rep.to;
  const t = rep.totals;
  const totals = $("totals");
  totals.replaceChildren();
  for (const [label, value] of [["conversations", t.conversations], ["users", t.users], ["turns", t.turns],
    ["fallback", pct(t.fallbackRate)], ["knowledge base", pct(t.knowledgeBaseShare)], ["errors", pct(t.errorRate)],
    ["mean confidence", t.meanConfidence === null ? "none" : t.meanConfidence.toFixed(2)]]) {
    const d = el("div", "", label);
    d.prepend(el("b", "", value));
    totals.appendChild(d);
  }
  const chart = $("daychart");
  chart.replaceChildren();
  const top = Math.max(1, ...rep.days.map((d) => d.turns));
  for (const d of rep.days) {
    const col = el("div", "day");
    col.title = d.day + ": " + d.turns + " turns, " + d.fallbackTurns + " fell back";
    const answered = el("div", "answered");
    answered.style.height = (70 * (d.turns - d.fallbackTurns)) / top + "px";
    const fallback = el("div", "fallback");
    fallback.style.height = (70 * d.fallbackTurns) / top + "px";
    col.append(answered, fallback);
    chart.appendChild(col);
  }
  $("overview").hidden = false;
}

function figures(g) {
  const p = el("div", "figures");
  const trend = g.thisWeek > g.lastWeek ? " up" : "";
  p.append(el("span", "", g.users + " users, asked " + g.asked + " times; first " + day(g.firstSeen) + ", last " + day(g.lastSeen) + "; this week "),
    el("span", trend.trim(), g.thisWeek), el("span", "", " against " + g.lastWeek + " the week before"));
  const reasons = Object.entries(g.reasons || {}).map(([r, n]) => r.replace("_", " ") + " " + n).join(", ");
  p.append(el("span", "", " · " + reasons));
  return p;
}

function nearest(g) {
  const n = g.nearest;
  const p = el("div", "nearest");
  if (!n) {
    p.textContent = "Nearest content: not measured (the api groups by words).";
    return p;
  }
  p.append(el("span", "", "Nearest: "));
  for (const [label, m] of [["FAQ", n.faq], ["intent", n.intent], ["handler", n.handler]]) {
    if (!m) continue;
    p.append(el("span", "", label + " "), el("code", "", m.id), el("span", "", " (" + m.similarity.toFixed(2) + ") "));
  }
  if (!n.faq && !n.intent) p.append(el("span", "", "no FAQ or intent yet"));
  return p;
}

function wordingsOf(g) {
  return g.wordings.map((w) => w.query);
}

// act runs one action of a group and shows its outcome in the group.
async function act(li, what, run) {
  const out = li.querySelector(".outcome");
  out.className = "outcome";
  out.textContent = what + "…";
  try {
    out.textContent = await run();
    out.className = "outcome done";
    li.querySelectorAll(".actions button, .actions input, .actions textarea").forEach((b) => (b.disabled = true));
  } catch (e) {
    out.textContent = what + " failed: " + e.message;
    out.className = "outcome problem";
  }
}

function actions(li, g) {
  const box = el("div", "actions");
  const seen = { g: g.id, w: wordingsOf(g), u: g.users };
  const n = g.nearest || {};
  if (n.faq) {
    const b = el("button", "add-faq", "Add wordings to FAQ " + n.faq.id);
    b.type = "button";
    b.onclick = () => act(li, "Adding to FAQ " + n.faq.id, async () => {
      const d = await graphql(`mutation($appId: ID, $g: ID!, $w: [String!]!, $u: Int!, $f: ID) { addGapWordings(appId: $appId, groupId: $g, wordings: $w, users: $u, faqId: $f) { added } }`,
        Object.assign({ f: n.faq.id }, seen));
      return "Added " + d.addGapWordings.added.length + " wordings to FAQ " + n.faq.id + "; the group is resolved.";
    });
    box.appendChild(b);
  }
  if (n.intent) {
    const b = el("button", "add-intent", "Add wordings to intent " + n.intent.id);
    b.type = "button";
    b.onclick = () => act(li, "Adding to intent " + n.intent.id, async () => {
      const d = await graphql(`mutation($appId: ID, $g: ID!, $w: [String!]!, $u: Int!, $i: ID) { addGapWordings(appId: $appId, groupId: $g, wordings: $w, users: $u, intentId: $i) { added } }`,
        Object.assign({ i: n.intent.id }, seen));
      return "Added " + d.addGapWordings.added.length + " utterances to intent " + n.intent.id + "; the group is resolved.";
    });
    box.appendChild(b);
  }
  const id = el("input", "faq-id");
  id.placeholder = "new FAQ's id";
  const answer = el("textarea", "faq-answer");
  answer.placeholder = "its answer";
  const create = el("button", "create-faq", "New FAQ");
  create.type = "button";
  create.onclick = () => act(li, "Writing the FAQ", async () => {
    await graphql(`mutation($appId: ID, $g: ID!, $w: [String!]!, $u: Int!, $faq: GapFaqInput!) { createFaqFromGap(appId: $appId, groupId: $g, wordings: $w, users: $u, faq: $faq) { id } }`,
      Object.assign({ faq: { id: id.value.trim(), question: g.representative, answer: answer.value } }, seen));
    return "Wrote FAQ " + id.value.trim() + "; the group is resolved.";
  });
  const reason = el("input", "dismiss-reason");
  reason.placeholder = "why dismiss";
  const dismiss = el("button", "dismiss", "Dismiss");
  dismiss.type = "button";
  dismiss.onclick = () => act(li, "Dismissing", async () => {
    await graphql(`mutation($appId: ID, $g: ID!, $w: [String!]!, $u: Int!, $r: String!) { dismissGap(appId: $appId, groupId: $g, wordings: $w, users: $u, reason: $r) { state } }`,
      Object.assign({ r: reason.value }, seen));
    return "Dismissed until it grows.";
  });
  const samples = el("button", "samples", "Sample conversations");
  samples.type = "button";
  samples.onclick = () => showSamples(li, g);
  box.append(id, answer, create, reason, dismiss, samples);
  return box;
}

async function showSamples(li, g) {
  const out = li.querySelector(".outcome");
  try {
    const w = g.wordings[0];
    const s = await call("/cms/analytics/samples", { wording: w.query, day: day(w.lastSeen) });
    out.replaceChildren(el("span", "", s.sessions.length ? "Asked in: " : "No conversation found on " + s.day + "."));
    for (const id of s.sessions) {
      const b = el("button", "link", id);
      b.type = "button";
      b.onclick = () => openConversation(id, 0);
      out.append(b, el("span", "", " "));
    }
  } catch (e) {
    out.textContent = "Sample conversations: " + e.message;
    out.className = "outcome problem";
  }
}

function drawInbox(inbox) {
  const note = inbox.groups.length + " " + inbox.state + " groups of " + inbox.wordings + " wordings, grouped by " + inbox.groupedBy +
    ", confidence below " + inbox.lowConfidence + (inbox.truncated ? "; the wordings asked by fewer users were left out" : "") +
    (inbox.moreGroups ? "; " + inbox.moreGroups + " more groups" : "");
  $("inboxnote").textContent = note;
  const list = $("groups");
  list.replaceChildren();
  for (const g of inbox.groups) {
    const li = el("li", "group " + g.state);
    li.dataset.group = g.id;
    li.append(el("div", "rep", g.representative));
    li.append(figures(g));
    if (g.decision) {
      li.append(el("div", "decision", (g.reopened ? "Open again: " : "") + g.decision.state + " on " + day(g.decision.decidedAt) +
        (g.decision.reason ? " (" + g.decision.reason + ")" : "") + " at " + g.decision.users + " users"));
    }
    const ul = el("ul", "wordings");
    for (const w of g.wordings) {
      const item = el("li", "", w.query);
      item.append(el("span", "", w.users + " users, " + w.asked + " times"));
      ul.appendChild(item);
    }
    if (g.moreWordings) ul.appendChild(el("li", "", "and " + g.moreWordings + " more"));
    li.append(ul, nearest(g), actions(li, g), el("div", "outcome"));
    list.appendChild(li);
  }
  $("inbox").hidden = false;
}

function drawSessions(s) {
  const rows = $("sessionrows");
  rows.replaceChildren();
  for (const ss of s.sessions) {
    const tr = el("tr");
    tr.append(el("td", "", clock(ss.started)), el("td", "", ss.turns), el("td", "", ss.outcome || "none"), el("td", "", ss.leftAt));
    const td = el("td", "session");
    const b = el("button", "link", ss.sessionId);
    b.type = "button";
    b.onclick = () => openConversation(ss.sessionId, 0);
    td.appendChild(b);
    tr.appendChild(td);
    rows.appendChild(tr);
  }
  $("sessionsbox").hidden = false;
}

async function openConversation(session, offset) {
  try {
    const c = await call("/cms/analytics/conversation", { session, offset });
    const rows = $("turns");
    if (offset === 0) rows.replaceChildren();
    $("conversationid").textContent = session;
    for (const tn of c.turns) {
      const tr = el("tr");
      tr.append(el("td", "", clock(tn.at)), el("td", "", tn.query), el("td", "", tn.answer), el("td", "", tn.handler), el("td", "", tn.intent),
        el("td", "", tn.confidence === null ? "" : tn.confidence.toFixed(2)));
      rows.appendChild(tr);
    }
    conversation = { session, offset: offset + c.turns.length };
    $("moreturns").hidden = !c.more;
    $("conversationbox").hidden = false;
    $("conversationbox").scrollIntoView();
  } catch (e) {
    setStatus("The conversation could not be read: " + e.message, true);
  }
}

async function load(ev) {
  ev.preventDefault();
  days = Math.min(366, Math.max(1, parseInt($("days").value, 10) || 30));
  setStatus("Reading…");
  try {
    const [rep, inbox, sessions] = await Promise.all([
      call("/cms/analytics/report", { days }),
      call("/cms/analytics/gaps", { days, state: $("state").value }),
      call("/cms/analytics/sessions", { days: Math.min(days, 7) }),
    ]);
    drawOverview(rep);
    drawInbox(inbox);
    drawSessions(sessions);
    setStatus("App " + rep.appId + ", " + rep.from + " to " + rep.to + ".");
  } catch (e) {
    setStatus("The analytics could not be read: " + e.message, true);
  }
}

$("open").addEventListener("submit", load);
$("moreturns").addEventListener("click", () => conversation && openConversation(conversation.session, conversation.offset));
