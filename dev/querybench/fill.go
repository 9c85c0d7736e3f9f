package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// benchApp is the large app the queries are about.
const benchApp = "demo-app"

// apps are drawn by a session's hash modulo 10: benchApp holds four of the
// ten slots, so about 40% of the events.
func apps() []string {
	return []string{benchApp, benchApp, benchApp, benchApp,
		"shop-app", "bank-app", "travel-app", "clinic-app", "news-app", "games-app"}
}

// intent is a matched intent with the question that reaches it and its answer.
type intent struct{ id, query, answer, tag string }

func intents() []intent {
	return []intent{
		{"OrderStatus", "where is my order", "Your order shipped yesterday and arrives tomorrow.", "orders"},
		{"OpeningHours", "when are you open on saturday", "We are open from nine to five on Saturday.", "hours"},
		{"ProductSearch", "do you have blue running shoes in size 42", "We have three blue running shoes in size 42 in stock.", "search"},
		{"BookAppointment", "book an appointment for next tuesday", "I found three free slots next Tuesday afternoon.", "booking"},
		{"ReturnPolicy", "how do i return a jacket", "You can return unworn items within 30 days.", "returns"},
		{"StoreLocator", "nearest store to me", "The nearest store is at 12 Main Street.", "locations"},
		{"PaymentMethods", "can i pay with paypal", "We take cards, PayPal and bank transfers.", "payments"},
		{"CancelOrder", "cancel my last order", "Your last order is cancelled; the refund takes three days.", "orders"},
		{"Shipping", "how much is shipping to austria", "Shipping to Austria costs 9 euros.", "shipping"},
		{"TalkToAgent", "talk to a person", "I am connecting you with a colleague.", "handover"},
	}
}

// unknownQueries are what users ask that no intent matches.
func unknownQueries() []string {
	return []string{"what is the meaning of life", "asdfgh", "do you like pizza", "tell me a joke about trains",
		"is it going to rain on mars", "who won the match yesterday", "sing a song", "hmm"}
}

// sqlStrings is an SQL array literal of the strings.
func sqlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// window is the span the events fall in: Days calendar days ending now,
// with session starts at least ten minutes before now, so that no event
// of a session (at most 12 events, 25 s apart) lies in the future. In the
// first hours of a UTC day the Days days end with yesterday instead: so
// short a part of today would hold no session of a small fill, and the
// queries would find one day fewer.
type window struct {
	base time.Time // midnight UTC, Days-1 days before the last day
	span int64     // seconds in which sessions start
}

// minToday is how much of today the window must hold for today to be its
// last day.
const minToday = 6 * time.Hour

func newWindow(now time.Time, days int) window {
	now = now.UTC()
	end := now
	last := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if now.Sub(last) < minToday {
		end = last
		last = last.AddDate(0, 0, -1)
	}
	base := last.AddDate(0, 0, -(days - 1))
	return window{base: base, span: int64(end.Sub(base)/time.Second) - 600}
}

// insertSQL generates the events numbered from off to off+count-1 on the
// server. Every column is a function of the event's number n (and the
// window), so inserting a range again writes the very same rows, as a
// consumer's redelivery does. Events come in blocks of 16 split at a point
// drawn from 4 to 12, into two sessions of 4 to 12 events each (8 on
// average). A session's first event is its launch REQUEST; each later one
// is an ERROR (5%) or a REQUEST_RESPONSE turn whose request type is an
// intent request (60%, 1 in 20 of them matching no intent), an option
// selection (20%) or an unknown input (20%).
func insertSQL(db string, w window, totalEvents, off, count int) string {
	var handlers, ids, queries, answers, tags []string
	for _, it := range intents() {
		ids = append(ids, it.id)
		handlers = append(handlers, it.id+"Handler")
		queries = append(queries, it.query)
		answers = append(answers, it.answer)
		tags = append(tags, it.tag)
	}
	// Each app draws its users from a pool a third as large as all the
	// sessions (8 events each on average), so that some users return.
	users := max(totalEvents/24, 1)
	return fmt.Sprintf(`INSERT INTO %[1]s.events (event_id, app_id, organization_id, event_time, received_at,
    type, name, session_id, user_id, channel, platform, selected_handler, current_handler, environment,
    request_type, intent_id, raw_query, query_normalized, match_confidence, output_display_text, output_ssml,
    display_count, tag, tags, error_message, error_stack, message, kb_used, kb_documents, kb_faqs,
    event_time_source, payload, extra, kafka_partition, kafka_offset)
SELECT
    lower(hex(cityHash64(n, 'event'))),
    app,
    concat('org-', app),
    toDateTime(at, 'UTC'),
    toDateTime(at + 1, 'UTC'),
    multiIf(kind = 0, 'REQUEST', kind = 1, 'ERROR', 'AnalyticsEvent'),
    multiIf(kind = 0, 'LAUNCH_REQUEST', kind = 1, 'HandlerError', 'REQUEST_RESPONSE'),
    concat('session-', lower(hex(cityHash64(s, 'session')))),
    concat(app, '-user-', toString(cityHash64(s, 'user') %% %[4]d)),
    channel,
    multiIf(channel = 'alexa', 'alexa', channel = 'google-assistant', 'google', 'stentor-platform'),
    handler,
    handler,
    'production',
    multiIf(kind = 0, 'LAUNCH_REQUEST', kind = 1, '', request_type),
    intent_id,
    raw_query,
    lowerUTF8(raw_query),
    if(kind = 2 AND intent_id != '', toFloat32(0.3 + (cityHash64(n, 'confidence') %% 700) / 1000), NULL),
    answer,
    if(answer = '', '', concat('<speak>', answer, '</speak>')),
    toUInt16(kind = 2),
    tag,
    if(tag = '', emptyArrayString(), [tag]),
    if(kind = 1, 'upstream service timed out', ''),
    if(kind = 1, concat('Error: upstream service timed out\n    at ', handler, '.handle (handler.js:42:11)'), ''),
    if(kind = 1, 'upstream service timed out', ''),
    toUInt8(kb),
    toUInt16(kb * 3),
    toUInt16(kb),
    'runtime',
    concat('{"request":{"type":"', request_type, '","intentId":"', intent_id, '","rawQuery":"', raw_query,
        '"},"response":{"outputSpeech":{"displayText":"', answer, '"}}}'),
    '{}',
    toUInt16(n %% 6),
    n
FROM
(
    SELECT n, s, app, channel, at, kind, request_type, intent_id, kb,
        multiIf(kind = 0, 'LaunchRequestHandler', intent_id != '', concat(intent_id, 'Handler'),
            kind = 1, arrayElement(%[5]s, 1 + cityHash64(n, 'handler') %% %[10]d), 'InputUnknownHandler') AS handler,
        multiIf(kind != 2, '', intent_id != '', concat(arrayElement(%[6]s, intent_no),
            if(cityHash64(n, 'variant') %% 3 = 0, concat(' please ', toString(cityHash64(n, 'variant') %% 50)), '')),
            arrayElement(%[9]s, 1 + cityHash64(n, 'unknown') %% %[11]d)) AS raw_query,
        multiIf(kind != 2, '', intent_id != '', arrayElement(%[7]s, intent_no),
            kb = 1, 'Here is what I found in our help centre.', 'Sorry, I did not get that.') AS answer,
        if(kind = 2 AND intent_id != '', arrayElement(%[8]s, intent_no), '') AS tag
    FROM
    (
        SELECT n, s, app, channel, at, kind, request_type, intent_no,
            if(kind = 2 AND (request_type = 'OPTION_SELECT_REQUEST'
                OR (request_type = 'INTENT_REQUEST' AND cityHash64(n, 'nomatch') %% 20 != 0)),
                arrayElement(%[12]s, intent_no), '') AS intent_id,
            toUInt8(kind = 2 AND intent_id = '' AND cityHash64(n, 'kb') %% 2 = 0) AS kb
        FROM
        (
            SELECT n, s,
                arrayElement(%[13]s, 1 + cityHash64(s, 'app') %% 10) AS app,
                arrayElement(['web-chat', 'web-chat', 'alexa', 'google-assistant', 'sms', 'facebook-messenger'],
                    1 + cityHash64(s, 'channel') %% 6) AS channel,
                %[2]d + cityHash64(s, 'start') %% %[3]d + p * 25 + cityHash64(n, 'gap') %% 20 AS at,
                multiIf(p = 0, 0, cityHash64(n, 'kind') %% 100 < 5, 1, 2) AS kind,
                arrayElement(['INTENT_REQUEST', 'INTENT_REQUEST', 'INTENT_REQUEST', 'OPTION_SELECT_REQUEST', 'INPUT_UNKNOWN_REQUEST'],
                    1 + cityHash64(n, 'request') %% 5) AS request_type,
                1 + cityHash64(n, 'intent') %% %[10]d AS intent_no
            FROM
            (
                SELECT n, block * 2 + (q >= split) AS s, if(q < split, q, q - split) AS p
                FROM
                (
                    SELECT number + %[14]d AS n, intDiv(n, 16) AS block, n %% 16 AS q, 4 + cityHash64(block) %% 9 AS split
                    FROM numbers(%[15]d)
                )
            )
        )
    )
)`, db, w.base.Unix(), w.span, users,
		sqlStrings(handlers), sqlStrings(queries), sqlStrings(answers), sqlStrings(tags), sqlStrings(unknownQueries()),
		len(ids), len(unknownQueries()), sqlStrings(ids), sqlStrings(apps()), off, count)
}

// fillResult says what fill wrote and how long it took.
type fillResult struct {
	events, redelivered int
	took                time.Duration
}

// fill writes o.events events in statements of o.chunk, each going through
// the materialized views as one of the consumer's inserts does, then
// writes the first o.redelivered of them again, as a consumer's
// redelivery does, so that the deduplicating forms have copies to drop.
func fill(ctx context.Context, s *chstore.Store, db string, w window, o options) (fillResult, error) {
	ctx = s.Context(ctx)
	start := time.Now()
	for off := 0; off < o.events; off += o.chunk {
		n := min(o.chunk, o.events-off)
		if err := s.Conn().Exec(ctx, insertSQL(db, w, o.events, off, n)); err != nil {
			return fillResult{}, fmt.Errorf("insert events %d to %d: %w", off, off+n-1, err)
		}
		o.progress("filled", "events", off+n)
	}
	took := time.Since(start)
	if err := s.Conn().Exec(ctx, insertSQL(db, w, o.events, 0, o.redelivered())); err != nil {
		return fillResult{}, fmt.Errorf("insert redelivered events: %w", err)
	}
	return fillResult{events: o.events, redelivered: o.redelivered(), took: took}, nil
}

// settle waits until the server runs no merges, so that the measured
// queries do not share the cores with them; it gives up after limit.
func settle(ctx context.Context, s *chstore.Store, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var merges uint64
		if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.merges").Scan(&merges); err != nil {
			return fmt.Errorf("read running merges: %w", err)
		}
		if merges == 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
