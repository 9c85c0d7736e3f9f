package delivery

import (
	"strconv"
	"strings"
	"time"
)

// turns are what the sessions say; a few sizes of answer, so that rows
// and batches are not all alike.
var turns = [...]struct{ intent, query, answer string }{
	{"OrderStatusIntent", "where is my order", "Your order left the warehouse this morning and should arrive tomorrow."},
	{"OpeningHoursIntent", "when are you open", "We are open from nine to five on weekdays."},
	{"ReturnPolicyIntent", "how do I return a jacket", "You can return anything within thirty days. Bring the receipt or the card you paid with, and we will refund you or exchange it, whichever you prefer."},
	{"StoreLocatorIntent", "is there a store near me", "The nearest store is on Main Street, two miles from you."},
}

// eventID names event k of batch n: the run, the batch and the position,
// so that the check can tell which batch a stored row came from.
func eventID(runID string, n, k int) string {
	return runID + "-" + strconv.Itoa(n) + "-" + strconv.Itoa(k)
}

// parseEventID is the inverse of eventID for IDs of the run.
func parseEventID(runID, id string) (n, k int, ok bool) {
	rest, found := strings.CutPrefix(id, runID+"-")
	if !found {
		return 0, 0, false
	}
	ns, ks, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	n, err1 := strconv.Atoi(ns)
	k, err2 := strconv.Atoi(ks)
	if err1 != nil || err2 != nil || n < 0 || k < 0 {
		return 0, 0, false
	}
	return n, k, true
}

// body is batch n as a runtime sends it: a session opens with a launch
// request, then REQUEST_RESPONSE turns with full payloads. The time is
// fixed when the batch is first made, so a retried batch is the same bytes
// and its rows carry the same event time.
func (l *Load) body(n int, at time.Time) []byte {
	b := make([]byte, 0, 512*l.cfg.BatchSize)
	b = append(b, `{"events":[`...)
	iso := at.UTC().Format("2006-01-02T15:04:05.000Z")
	for k := range l.cfg.BatchSize {
		if k > 0 {
			b = append(b, ',')
		}
		seq := n*l.cfg.BatchSize + k
		session := l.cfg.RunID + "-s" + strconv.Itoa(seq/8)
		b = append(b, `{"eventId":`...)
		b = strconv.AppendQuote(b, eventID(l.cfg.RunID, n, k))
		if seq%8 == 0 {
			b = append(b, `,"type":"REQUEST","name":"LAUNCH_REQUEST","sessionId":`...)
			b = strconv.AppendQuote(b, session)
			b = append(b, `,"isoTime":"`...)
			b = append(b, iso...)
			b = append(b, `"}`...)
			continue
		}
		t := turns[seq%len(turns)]
		b = append(b, `,"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","sessionId":`...)
		b = strconv.AppendQuote(b, session)
		b = append(b, `,"userId":`...)
		b = strconv.AppendQuote(b, "u"+strconv.Itoa(seq/64))
		b = append(b, `,"channel":"`...)
		b = append(b, [...]string{"web", "voice"}[seq%2]...)
		b = append(b, `","platform":"delivery-check","isoTime":"`...)
		b = append(b, iso...)
		b = append(b, `","payload":{"request":{"type":"INTENT_REQUEST","intentId":`...)
		b = strconv.AppendQuote(b, t.intent)
		b = append(b, `,"rawQuery":`...)
		b = strconv.AppendQuote(b, t.query)
		b = append(b, `,"sessionId":`...)
		b = strconv.AppendQuote(b, session)
		b = append(b, `,"matchConfidence":0.9},"response":{"outputSpeech":{"displayText":`...)
		b = strconv.AppendQuote(b, t.answer)
		b = append(b, `,"ssml":`...)
		b = strconv.AppendQuote(b, "<speak>"+t.answer+"</speak>")
		b = append(b, `}}}}`...)
	}
	return append(b, "]}"...)
}
