// A minimal assistant runtime built on the Stentor reference client. It plays
// one conversation turn by turn, records events the way Stentor's runtime
// does (EventService, StudioEventStream, wrapCallback) and writes a manifest
// of every PUT /cms/app/events it made: the events exactly as sent, the HTTP
// status and the answer. With STUDIO_READ_CONTENT=1 it first reads the app's
// content as a runtime does (the handlers, one handler, a knowledge-base
// query) and records what it got under "reads". With STUDIO_UNANSWERED, a
// JSON array of questions, it plays instead a conversation where each of
// them falls back, as user STUDIO_USER_ID.
//
//	STUDIO_TOKEN=... STUDIO_APP_ID=... STUDIO_BASE_URL=http://127.0.0.1:8080 \
//	  node runtime.js manifest.json
"use strict";

const fs = require("fs");
const { EventService, wrapCallback } = require("stentor-service-event");
const { StudioService, StudioEventStream } = require("stentor-service-studio");

const manifestPath = process.argv[2];
if (!manifestPath) {
    console.error("usage: node runtime.js MANIFEST");
    process.exit(2);
}

// Every PUT of events as it went over the wire. StudioService calls the
// global fetch, so wrapping it sees the exact body and the status.
const puts = [];
let turnName = "";
const realFetch = globalThis.fetch;
globalThis.fetch = async (url, init = {}) => {
    const res = await realFetch(url, init);
    if (init.method === "PUT" && String(url).includes("/cms/app/events")) {
        const text = await res.clone().text();
        let answer;
        try {
            answer = JSON.parse(text);
        } catch (e) {
            answer = text;
        }
        puts.push({ turn: turnName, status: res.status, answer, events: JSON.parse(init.body).events });
    }
    return res;
};

// The service and stream read STUDIO_TOKEN, STUDIO_APP_ID and STUDIO_BASE_URL.
const service = new StudioService();
const events = new EventService([new StudioEventStream({ service })], {
    channel: "web-chat",
    platform: "stentor-platform",
    environment: "production"
});

// wrapCallback starts the flush without waiting for it; keep its promise so
// that each turn ends only when its PUT has been answered.
let flushing;
const flush = events.flush;
events.flush = () => (flushing = flush());

const sessionId = "rt-session-" + process.pid + "-" + Date.now();
const userId = process.env.STUDIO_USER_ID || "rt-user-1";
const failures = [];

// turn plays one request: handle gets the request and a Lambda-style
// callback wrapped as Stentor's runtime wraps it.
async function turn(name, request, prefix, handle) {
    turnName = name;
    flushing = undefined;
    // What Stentor's runtime adds to the prefix on every request.
    events.addPrefix({
        sessionId,
        userId,
        isHealthCheck: false,
        isNewSession: !!request.isNewSession,
        rawQuery: request.rawQuery,
        confidence: undefined,
        currentHandler: undefined,
        selectedHandler: undefined,
        ...prefix
    });
    const callback = wrapCallback(events, () => undefined);
    handle(request, callback);
    if (!flushing) {
        throw new Error(`turn ${name}: wrapCallback did not flush`);
    }
    try {
        await flushing;
    } catch (e) {
        // The client keeps the events and sends them again with the next
        // flush; the manifest's statuses show it.
        failures.push(`turn ${name}: ${e.message}`);
    }
}

function base(type, extra) {
    return { type, userId, sessionId, channel: "web-chat", platform: "stentor-platform", locale: "en-US", ...extra };
}

function output(text) {
    return { displayText: text, ssml: `<speak>${text}</speak>` };
}

// A knowledge-base answer as the runtime merges it into the request: ten
// whole documents from search and the FAQs that matched.
function knowledgeBaseResult() {
    const rnd = mulberry32(20261121);
    const doc = (i, size) => {
        const title = `${pick(rnd, TOPICS)} guide, part ${i + 1}`;
        const document = paragraphs(rnd, size);
        const begin = document.indexOf(". ") + 2;
        return {
            title,
            uri: `https://help.example.com/articles/${1000 + i}`,
            document,
            highlights: [{ beginOffset: begin, endOffset: begin + 120, topAnswer: i === 0 }],
            attributes: { source: "help-center", updated: "2026-10-0" + ((i % 9) + 1) }
        };
    };
    const suggested = [];
    const documents = [];
    for (let i = 0; i < 10; i++) {
        const d = doc(i, 10500);
        if (i < 3) {
            suggested.push({ ...d, topAnswer: d.document.slice(d.highlights[0].beginOffset, d.highlights[0].endOffset), matchConfidence: 0.9 - i / 10 });
        } else {
            documents.push(d);
        }
    }
    const faqs = [];
    for (let i = 0; i < 6; i++) {
        const question = `How do I ${pick(rnd, VERBS)} my ${pick(rnd, NOUNS)}?`;
        faqs.push({
            question,
            questions: [question, `Can I ${pick(rnd, VERBS)} a ${pick(rnd, NOUNS)} online?`],
            uri: `https://help.example.com/faq/${200 + i}`,
            document: paragraphs(rnd, 1800),
            matchConfidence: 0.75 - i / 20,
            handlerId: `FAQ_${200 + i}`
        });
    }
    return { suggested, documents, faqs };
}

const TOPICS = ["Shipping", "Returns", "Warranty", "Billing", "Account", "Store pickup", "Gift cards", "Repairs"];
const NOUNS = ["order", "package", "refund", "receipt", "warranty claim", "gift card", "account", "delivery window", "store credit", "replacement"];
const VERBS = ["track", "return", "update", "cancel", "change", "extend", "transfer", "check"];
const PHRASES = [
    "within five business days", "from the account page", "at any store", "after the carrier scans it",
    "with the original receipt", "before the order ships", "by email and text message", "in most regions"
];

function mulberry32(seed) {
    return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

function pick(rnd, list) {
    return list[Math.floor(rnd() * list.length)];
}

// paragraphs returns about size characters of help-centre prose.
function paragraphs(rnd, size) {
    let text = "";
    while (text.length < size) {
        let p = "";
        for (let s = 0; s < 5; s++) {
            const noun = pick(rnd, NOUNS);
            p += `You can ${pick(rnd, VERBS)} your ${noun} ${pick(rnd, PHRASES)}, and the ${pick(rnd, NOUNS)} follows ${pick(rnd, PHRASES)}. `;
        }
        text += p.trim() + "\n\n";
    }
    return text.trim();
}

function lookUpOrder(orders, id) {
    return orders[id].status; // throws for an unknown order, as a faulty handler would
}

// readContent reads the app's content through the reference client.
async function readContent() {
    const handlers = await service.getAll();
    const first = handlers.length > 0 ? await service.get(handlers[0].intentId) : undefined;
    const knowledge = await service.query("can I return a gift without the receipt");
    return {
        handlers: handlers.map((h) => h.intentId),
        handler: first ? first.intentId : null,
        documents: (knowledge.documents || []).length,
        faqs: (knowledge.faqs || []).length
    };
}

let reads;

// unanswered plays a launch, then each question as a turn the runtime
// did not understand, then the session's end.
async function unanswered(questions) {
    await turn("launch", base("LAUNCH_REQUEST", { intentId: "LaunchRequest", isNewSession: true }),
        { selectedHandler: "LaunchRequest", currentHandler: "LaunchRequest" },
        (request, callback) => {
            const response = { name: "Welcome", outputSpeech: output("Hi! How can I help?") };
            events.requestResponse(request, response);
            callback(null, { body: response }, request, response);
        });
    for (const [i, q] of questions.entries()) {
        await turn("unanswered " + i, base("INPUT_UNKNOWN_REQUEST", { intentId: "InputUnknown", rawQuery: q }),
            { selectedHandler: "InputUnknown", currentHandler: "LaunchRequest" },
            (request, callback) => {
                const response = { name: "Fallback", outputSpeech: output("Sorry, I don't know that one yet.") };
                events.requestResponse(request, response);
                callback(null, { body: response }, request, response);
            });
    }
    await turn("session ended", base("SESSION_ENDED_REQUEST", { reason: "USER_INITIATED" }),
        { currentHandler: "InputUnknown" },
        (request, callback) => callback(null, {}, request));
}

async function main() {
    if (process.env.STUDIO_UNANSWERED) {
        await unanswered(JSON.parse(process.env.STUDIO_UNANSWERED));
        fs.writeFileSync(manifestPath, JSON.stringify({ sessionId, puts, failures, reads }, null, 1) + "\n");
        if (failures.length > 0) {
            console.error(failures.join("\n"));
            process.exitCode = 1;
        }
        return;
    }
    if (process.env.STUDIO_READ_CONTENT === "1") {
        reads = await readContent();
    }
    await turn("launch", base("LAUNCH_REQUEST", { intentId: "LaunchRequest", isNewSession: true }),
        { selectedHandler: "LaunchRequest", currentHandler: "LaunchRequest" },
        (request, callback) => {
            const response = { name: "Welcome", tag: "welcome", outputSpeech: output("Hi! How can I help with your order?") };
            events.requestResponse(request, response);
            callback(null, { body: response }, request, response);
        });

    const order = base("INTENT_REQUEST", {
        intentId: "OrderStatusIntent",
        rawQuery: "where is my order 1234",
        matchConfidence: 0.92,
        slots: { orderNumber: { name: "orderNumber", value: "1234", rawValue: "1234" } }
    });
    await turn("intent", order, { selectedHandler: "OrderStatusIntent", currentHandler: "LaunchRequest", confidence: 0.92 },
        (request, callback) => {
            events.message("Order 1234 found in the order system");
            events.message("WARN: order 1234 has two shipments");
            const response = {
                name: "Order status",
                tag: ["orders", "order-status"],
                outputSpeech: output("Order 1234 ships in two parts: the first arrives Tuesday."),
                displays: [{
                    type: "LIST",
                    title: "Your shipments",
                    items: [
                        { title: "Shipment 1", token: "ship-1", description: "Arrives Tuesday" },
                        { title: "Shipment 2", token: "ship-2", description: "Arrives Friday" }
                    ]
                }]
            };
            events.requestResponse(request, response);
            callback(null, { body: response }, request, response);
        });

    const kb = base("INPUT_UNKNOWN_REQUEST", {
        intentId: "InputUnknown",
        rawQuery: "can I return a gift without the receipt",
        matchConfidence: 0.31,
        knowledgeBaseResult: knowledgeBaseResult()
    });
    await turn("knowledge base", kb, { selectedHandler: "KnowledgeBaseHandler", currentHandler: "OrderStatusIntent" },
        (request, callback) => {
            const answer = request.knowledgeBaseResult.suggested[0].topAnswer;
            const response = { name: "Knowledge answer", tag: "kb", outputSpeech: output(answer) };
            events.requestResponse(request, response);
            callback(null, { body: response }, request, response);
        });

    const failing = base("INTENT_REQUEST", {
        intentId: "OrderStatusIntent",
        rawQuery: "and order 9999",
        matchConfidence: 0.88,
        slots: { orderNumber: { name: "orderNumber", value: "9999", rawValue: "9999" } }
    });
    await turn("error", failing, { selectedHandler: "OrderStatusIntent", currentHandler: "KnowledgeBaseHandler", confidence: 0.88 },
        (request, callback) => {
            try {
                lookUpOrder({}, request.slots.orderNumber.value);
            } catch (e) {
                callback(e, undefined, request);
            }
        });

    await turn("session ended", base("SESSION_ENDED_REQUEST", { reason: "USER_INITIATED" }),
        { currentHandler: "OrderStatusIntent" },
        (request, callback) => callback(null, {}, request));

    fs.writeFileSync(manifestPath, JSON.stringify({ sessionId, puts, failures, reads }, null, 1) + "\n");
    if (failures.length > 0) {
        console.error(failures.join("\n"));
        process.exitCode = 1;
    }
}

main().catch((e) => {
    console.error(e);
    fs.writeFileSync(manifestPath, JSON.stringify({ sessionId, puts, failures: [...failures, String(e)], reads }, null, 1) + "\n");
    process.exitCode = 1;
});
