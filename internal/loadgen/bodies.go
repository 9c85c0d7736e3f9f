// Package loadgen drives load against the ingest service and measures it:
// request bodies shaped like Stentor's REQUEST_RESPONSE analytics events,
// closed- and open-loop HTTP load, the kafka-go producer ceiling for the
// same records, latency percentiles and per-process CPU and memory read
// from /proc.
package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// BodyOptions configure Bodies. Zero fields take the defaults below.
type BodyOptions struct {
	// Count is the number of distinct bodies.
	Count int
	// Events is the number of events in each body.
	Events int
	// EventsPerSession is how many events share one session ID on average;
	// sessions key the Kafka records, so they spread events over partitions.
	EventsPerSession int
	// AppID is written into every event; empty leaves the field out, and
	// ingest fills it from the token.
	AppID string
	// Seed makes the bodies reproducible: equal options give equal bodies.
	Seed uint64
	// EventBytes, when above an event's own size (about 1 KB), makes each
	// event about that large with the knowledge-base result a runtime
	// logs with a knowledge-base turn: whole documents found by search.
	EventBytes int
}

// Defaults for BodyOptions.
const (
	DefaultBodies           = 200
	DefaultBatch            = 50
	DefaultEventsPerSession = 5
)

func (o BodyOptions) withDefaults() BodyOptions {
	if o.Count <= 0 {
		o.Count = DefaultBodies
	}
	if o.Events <= 0 {
		o.Events = DefaultBatch
	}
	if o.EventsPerSession <= 0 {
		o.EventsPerSession = DefaultEventsPerSession
	}
	return o
}

// turn is one kind of conversation turn: an intent, what the user said and
// what the assistant answered, with a list display.
type turn struct {
	intent, query, answer, title, tag string
	items                             [3][2]string // title, description
}

var turns = [...]turn{
	{"OrderStatus", "where is my order, it should have arrived yesterday", "Your order shipped yesterday and should arrive tomorrow before noon.", "Orders", "order-status",
		[3][2]string{{"Order", "Shipped, arriving tomorrow"}, {"Order", "Delivered last week"}, {"Order", "Awaiting pickup at the depot"}}},
	{"OpeningHours", "when are you open on saturday and sunday", "We are open from nine to five on Saturday and closed on Sunday.", "Locations", "hours",
		[3][2]string{{"Downtown", "12 Main Street, open 9 to 5"}, {"Airport", "Terminal 2, open 6 to 22"}, {"Harbour", "Pier 4, open 10 to 4"}}},
	{"ProductSearch", "do you have the blue running shoes in size forty two", "We have three blue running shoes in size 42 in stock right now.", "Products", "search",
		[3][2]string{{"Trail Runner", "Blue, size 42, in stock"}, {"Road Racer", "Navy, size 42, two left"}, {"City Jogger", "Sky blue, size 42, ships in 3 days"}}},
	{"BookAppointment", "can I book an appointment for next tuesday afternoon", "I found three free slots next Tuesday afternoon. Which one suits you?", "Free slots", "booking",
		[3][2]string{{"Tuesday 13:30", "Dr. Meyer, room 4"}, {"Tuesday 15:00", "Dr. Okafor, room 2"}, {"Tuesday 16:45", "Dr. Meyer, room 4"}}},
	{"ReturnPolicy", "how do I return a jacket that does not fit", "You can return unworn items within 30 days; here are the ways to send it back.", "Return options", "returns",
		[3][2]string{{"In store", "Any branch, bring the receipt"}, {"Parcel", "Free label, drop at a post office"}, {"Courier", "Pickup at home for a small fee"}}},
}

var (
	channels  = [...]string{"web-chat", "alexa", "google-assistant", "sms", "facebook-messenger"}
	reqTypes  = [...]string{"INTENT_REQUEST", "INTENT_REQUEST", "INTENT_REQUEST", "OPTION_SELECT_REQUEST", "INPUT_UNKNOWN_REQUEST"}
	baseEpoch = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
)

type session struct {
	id, user, channel string
}

// Bodies returns o.Count distinct PUT /cms/app/events bodies of o.Events
// REQUEST_RESPONSE events of about 1 KB each.
func Bodies(o BodyOptions) [][]byte {
	o = o.withDefaults()
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	bodies := make([][]byte, o.Count)
	for b := range bodies {
		nSessions := (o.Events + o.EventsPerSession - 1) / o.EventsPerSession
		sessions := make([]session, nSessions)
		for s := range sessions {
			sessions[s] = session{
				id:      fmt.Sprintf("session-%016x", rng.Uint64()),
				user:    fmt.Sprintf("user-%08x", rng.Uint32()),
				channel: channels[rng.IntN(len(channels))],
			}
		}
		buf := make([]byte, 0, o.Events*max(1100, o.EventBytes+100)+16)
		buf = append(buf, `{"events":[`...)
		for i := range o.Events {
			if i > 0 {
				buf = append(buf, ',')
			}
			// Interleaved, as a server-side SDK flushing many
			// conversations at once sends them.
			buf = appendEvent(buf, rng, &sessions[i%nSessions], o.AppID, b*o.Events+i, o.EventBytes)
		}
		buf = append(buf, "]}"...)
		bodies[b] = buf
	}
	return bodies
}

func appendEvent(dst []byte, rng *rand.Rand, s *session, appID string, seq, size int) []byte {
	start := len(dst)
	t := &turns[rng.IntN(len(turns))]
	order := 100000 + rng.IntN(900000)
	at := baseEpoch.Add(time.Duration(seq) * 137 * time.Millisecond)

	dst = append(dst, `{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE"`...)
	if appID != "" {
		dst = appendField(dst, "appId", appID)
	}
	dst = appendField(dst, "sessionId", s.id)
	dst = appendField(dst, "userId", s.user)
	dst = appendField(dst, "channel", s.channel)
	dst = appendField(dst, "platform", "stentor-platform")
	dst = appendField(dst, "selectedHandler", t.intent+"Handler")
	dst = appendField(dst, "currentHandler", t.intent+"Handler")
	dst = appendField(dst, "environment", "production")
	dst = append(dst, `,"isoTime":"`...)
	dst = at.AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	dst = append(dst, `","payload":{"request":{"type":`...)
	dst = strconv.AppendQuote(dst, reqTypes[rng.IntN(len(reqTypes))])
	dst = appendField(dst, "intentId", t.intent)
	dst = appendField(dst, "rawQuery", t.query+" (ref "+strconv.Itoa(order)+")")
	dst = appendField(dst, "sessionId", s.id)
	dst = appendField(dst, "userId", s.user)
	dst = append(dst, `,"matchConfidence":`...)
	dst = strconv.AppendFloat(dst, 0.5+rng.Float64()/2, 'f', 3, 64)
	// The rest of the event is about 750 bytes.
	dst = appendKnowledge(dst, rng, size-(len(dst)-start)-750)
	dst = append(dst, `},"response":{"outputSpeech":{"displayText":`...)
	dst = strconv.AppendQuote(dst, t.answer)
	dst = appendField(dst, "ssml", "<speak>"+t.answer+"</speak>")
	dst = append(dst, `},"displays":[{"type":"LIST","title":`...)
	dst = strconv.AppendQuote(dst, t.title)
	dst = append(dst, `,"items":[`...)
	for k, it := range t.items {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"title":`...)
		dst = strconv.AppendQuote(dst, it[0])
		dst = appendField(dst, "token", t.tag+"-"+strconv.Itoa(order+k))
		dst = appendField(dst, "description", it[1])
		dst = append(dst, '}')
	}
	dst = append(dst, `]}]},"tag":`...)
	dst = strconv.AppendQuote(dst, t.tag)
	return append(dst, "}}"...)
}

// kbText is a paragraph of the documents of knowledge-base results.
const kbText = "Returns are free within thirty days of delivery for items that are unworn and in their original packaging. " +
	"Bring the receipt or the order number to any branch, or print a prepaid label from your account and drop the parcel at a post office. " +
	"Refunds reach the original payment method within five working days of the parcel arriving at our warehouse. "

// appendKnowledge writes ,"knowledgeBaseResult":{...} of about n bytes
// (nothing when n is small): documents of a few paragraphs each.
func appendKnowledge(dst []byte, rng *rand.Rand, n int) []byte {
	if n < 400 {
		return dst
	}
	end := len(dst) + n
	dst = append(dst, `,"knowledgeBaseResult":{"faqs":[],"suggested":[],"documents":[`...)
	for doc := 0; len(dst) < end-200; doc++ {
		if doc > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"uri":"https://kb.example.com/articles/`...)
		dst = strconv.AppendInt(dst, int64(rng.IntN(100000)), 10)
		dst = append(dst, `","title":"Returns and refunds","document":"`...)
		for text := min(2048, end-len(dst)-40); text > 0; text -= len(kbText) {
			dst = append(dst, kbText[:min(len(kbText), text)]...)
		}
		dst = append(dst, `"}`...)
	}
	return append(dst, "]}"...)
}

// appendField writes ,"key":"value"; keys and values here are plain ASCII
// without characters that need escaping beyond what AppendQuote does.
func appendField(dst []byte, key, val string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return strconv.AppendQuote(dst, val)
}
