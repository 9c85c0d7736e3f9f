package demotraffic

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/assistantcms/cms/internal/devbroker"
	"github.com/assistantcms/cms/internal/fixture"
	"github.com/assistantcms/cms/internal/ingesttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/bundle"
	"github.com/assistantcms/cms/pkg/pipeline/event"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// brokerBin is the development broker, built once for the package.
var brokerBin string

func TestMain(m *testing.M) { os.Exit(devbroker.RunTests(m, &brokerBin)) }

func demoBundle(t *testing.T) *content.Bundle {
	t.Helper()
	file, err := bundle.ReadFile("../../deploy/demo/content.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return &file.Bundle
}

func TestTurnsFrom(t *testing.T) {
	b := demoBundle(t)
	turns, err := TurnsFrom(b, "demo-app")
	if err != nil {
		t.Fatal(err)
	}
	faqs := 0
	for _, tr := range turns {
		if strings.ContainsAny(tr.Query, "{}$") || tr.Query == "" || tr.Intent == "" || tr.Answer == "" {
			t.Errorf("turn %+v", tr)
		}
		if tr.Intent == "KnowledgeBase" {
			faqs++
		}
	}
	if faqs == 0 || faqs == len(turns) {
		t.Errorf("%d of %d turns from FAQs; want both intents and FAQs", faqs, len(turns))
	}
	if _, err := TurnsFrom(b, "no-such-app"); err == nil {
		t.Error("an app without content must be refused")
	}
}

// TestEventsValidate runs the events a session sends through ingest's
// validator: none may be quarantined.
func TestEventsValidate(t *testing.T) {
	turns, err := TurnsFrom(demoBundle(t), "demo-app")
	if err != nil {
		t.Fatal(err)
	}
	v := event.NewValidator(event.Limits{})
	s := sessionInfo{id: "demo-1", user: "user-1", channel: "web-chat"}
	events := []any{launchEvent(s, time.Now())}
	for i, tr := range turns {
		for _, kind := range []turnKind{answered, fallback, failed} {
			evs, _ := turnEvents(s, drawnTurn{Turn: tr, kind: kind, confidence: float64(i%100) / 100}, time.Now())
			events = append(events, evs...)
		}
	}
	body, err := json.Marshal(map[string]any{"events": events})
	if err != nil {
		t.Fatal(err)
	}
	res, err := v.ProcessBatch(body, event.Meta{AppID: "demo-app", OrganizationID: "demo-org", ReceivedAt: time.Now(), IDSeed: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Quarantined) != 0 || len(res.Accepted) != len(events) {
		t.Errorf("%d accepted, %d quarantined of %d: %+v", len(res.Accepted), len(res.Quarantined), len(events), res.Errors)
	}
}

// TestRunAgainstIngest sends a second of conversations to ingest on the
// broker process: every event answered for is on the topic.
func TestRunAgainstIngest(t *testing.T) {
	ctx := context.Background()
	broker := devbroker.StartForTest(t, brokerBin)
	store, tokens := fixture.Open(t, `{"organizations":[{"id":"demo-org","name":"Demo"}],"apps":[{"appId":"demo-app","organizationId":"demo-org","name":"Demo"}]}`,
		map[string]tenancy.Token{"app": {OrganizationID: "demo-org", AppID: "demo-app"}})
	ingestURL, topic := ingesttest.Serve(t, broker.Addr(), store, "demo-events")

	turns, err := TurnsFrom(demoBundle(t), "demo-app")
	if err != nil {
		t.Fatal(err)
	}
	var reports atomic.Int32
	s, err := Run(ctx, Config{
		URL: ingestURL + "/cms/app/events", Token: tokens["app"], Turns: turns,
		Channels: []string{"web-chat", "alexa"}, SessionsPerSecond: 40, TurnsPerSession: 3, TurnGap: 20 * time.Millisecond,
		Duration: time.Second,
	}, func(Stats) { reports.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	if s.Failed != 0 || s.Quarantined != 0 || s.Sessions < 10 || s.Accepted < s.Sessions*2 || s.OK != s.Requests || s.Latency.Count != int(s.Requests) {
		t.Errorf("stats %+v", s)
	}
	// Every accepted batch was counted: a launch, or a turn of three events.
	tu := s.Turns
	if turns := tu.Answered + tu.Fallback + tu.Failed; s.Accepted != tu.Sessions+3*turns || turns == 0 {
		t.Errorf("%d events accepted; counted %d launches and %d turns (%+v)", s.Accepted, tu.Sessions, turns, tu)
	}
	if tu.Users == 0 || tu.Users > tu.Sessions || tu.KnowledgeBase > tu.Answered || tu.LowConfidence > tu.Answered {
		t.Errorf("turn stats %+v", tu)
	}
	if reports.Load() < 2 {
		t.Errorf("progress reported %d times in a second's run", reports.Load())
	}
	conn, err := kafka.DialLeader(ctx, "tcp", broker.Addr(), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	end, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	if end != s.Accepted {
		t.Errorf("%d events on the topic, %d accepted", end, s.Accepted)
	}
}
