package analyticsreport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/chfixture"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/forgetuser"
)

func TestConversations(t *testing.T) {
	s := chfixture.Migrated(t, nil)
	ctx := context.Background()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	at := func(days, minute int) time.Time {
		return today.AddDate(0, 0, days).Add(time.Duration(minute) * time.Minute)
	}
	n := 0
	ev := func(app, session, user, name, query, answer string, when time.Time) chfixture.Event {
		n++
		f := chfixture.Event{EventID: fmt.Sprint("c", n), AppID: app, OrganizationID: "o", EventTime: when, ReceivedAt: when,
			Type: "AnalyticsEvent", Name: name, SessionID: session, UserID: user, Channel: "web", Offset: uint64(n), Extra: "{}",
			RawQuery: query, DisplayText: answer, SelectedHandler: "H" + session}
		if name == "REQUEST_RESPONSE" {
			f.RequestType, f.IntentID, f.MatchConfidence = "INTENT_REQUEST", "I", chfixture.Confidence(0.8)
		}
		return f
	}
	var b chstore.EventBatch
	for _, f := range []chfixture.Event{
		ev("shop", "s1", "ann", "LAUNCH_REQUEST", "", "", at(-1, 0)),
		ev("shop", "s1", "ann", "REQUEST_RESPONSE", "Do you sell skateboards", "Not yet.", at(-1, 1)),
		ev("shop", "s1", "ann", "REQUEST_RESPONSE", "opening hours", "Nine to five.", at(0, 2)), // the next day
		ev("shop", "s2", "bob", "REQUEST_RESPONSE", "do you sell skateboards", "Not yet.", at(0, 3)),
		ev("other", "s3", "cy", "REQUEST_RESPONSE", "do you sell skateboards", "No.", at(0, 4)),
		// Three sessions that started in one second, paged one by one.
		ev("paged", "p2", "u", "REQUEST_RESPONSE", "a", "b", at(0, 5)),
		ev("paged", "p1", "u", "REQUEST_RESPONSE", "a", "b", at(0, 5)),
		ev("paged", "p3", "u", "REQUEST_RESPONSE", "a", "b", at(0, 5)),
	} {
		f.AddTo(&b)
	}
	if err := s.InsertEvents(ctx, &b); err != nil {
		t.Fatal(err)
	}

	week := SessionsQuery{AppID: "shop", From: today.AddDate(0, 0, -6), To: today, Limit: 10}
	got, err := Sessions(ctx, s, week)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SessionID != "s2" || got[1].SessionID != "s1" || got[1].Turns != 2 || !got[1].Started.Equal(at(-1, 0)) ||
		!got[1].Ended.Equal(at(0, 2)) || got[1].Outcome != "answered" || got[1].LeftAt != "Hs1" {
		t.Errorf("sessions %+v", got)
	}
	next := week
	next.Limit, next.AfterStart, next.AfterSession = 1, got[0].Started, got[0].SessionID
	if older, _ := Sessions(ctx, s, next); len(older) != 1 || older[0].SessionID != "s1" {
		t.Errorf("the page after s2: %+v", older)
	}
	var paged []string
	q := SessionsQuery{AppID: "paged", From: today, To: today, Limit: 1}
	for range 4 {
		page, err := Sessions(ctx, s, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].SessionID)
		q.AfterStart, q.AfterSession = page[0].Started, page[0].SessionID
	}
	if fmt.Sprint(paged) != "[p1 p2 p3]" {
		t.Errorf("sessions of one second, a page each: %v", paged)
	}
	fallback := week
	fallback.Outcome = "fallback"
	if none, err := Sessions(ctx, s, fallback); err != nil || len(none) != 0 {
		t.Errorf("sessions that ended in a fallback: %+v, %v", none, err)
	}

	turns, err := Conversation(ctx, s, "shop", "s1", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[0].Query != "Do you sell skateboards" || turns[0].Answer != "Not yet." || turns[1].Query != "opening hours" ||
		turns[0].Handler != "Hs1" || turns[0].Intent != "I" || turns[0].Confidence == nil || *turns[0].Confidence != 0.8 || !turns[1].At.Equal(at(0, 2)) {
		t.Errorf("conversation %+v", turns)
	}
	if page, _ := Conversation(ctx, s, "shop", "s1", 1, 1); len(page) != 1 || page[0].Query != "opening hours" {
		t.Errorf("second page %+v", page)
	}
	// Another app's session is not the app's.
	if other, err := Conversation(ctx, s, "shop", "s3", 0, 10); err != nil || len(other) != 0 {
		t.Errorf("another app's session: %+v, %v", other, err)
	}

	samples, err := Samples(ctx, s, "shop", "do you sell skateboards", today)
	if err != nil || fmt.Sprint(samples) != "[s2]" {
		t.Errorf("samples today %v, %v", samples, err)
	}
	if samples, _ := Samples(ctx, s, "shop", "do you sell skateboards", today.AddDate(0, 0, -1)); fmt.Sprint(samples) != "[s1]" {
		t.Errorf("samples yesterday %v", samples)
	}

	// Forgetting a user removes their conversations.
	if _, err := forgetuser.Forget(ctx, s, forgetuser.Request{AppID: "shop", UserID: "ann", Poll: 20 * time.Millisecond}, nil); err != nil {
		t.Fatal(err)
	}
	if turns, err := Conversation(ctx, s, "shop", "s1", 0, 10); err != nil || len(turns) != 0 {
		t.Errorf("a forgotten user's conversation: %+v, %v", turns, err)
	}
	if got, _ := Sessions(ctx, s, week); len(got) != 1 || got[0].SessionID != "s2" {
		t.Errorf("sessions after forgetting ann: %+v", got)
	}
}
