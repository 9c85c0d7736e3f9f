package faults

import (
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/delivery"
	"github.com/assistantcms/cms/internal/localstack"
)

// rate is the load every pipeline fault runs under, in events per second.
const rate = 1000

// TestBrokerRestarted stops the broker with SIGTERM under load, leaves it
// down for 5 s and starts it again on its data directory.
func TestBrokerRestarted(t *testing.T) {
	restartBroker(t, syscall.SIGTERM, 5*time.Second)
}

// TestBrokerKilled kills the broker with SIGKILL under load and starts it
// again on its data directory after 2 s. The broker writes each batch to
// its files before acknowledging it, and the operating system keeps what
// was written when the process dies (fsync, -sync, matters only if the
// machine goes down), so nothing acknowledged may be missing.
func TestBrokerKilled(t *testing.T) {
	restartBroker(t, syscall.SIGKILL, 2*time.Second)
}

// restartBroker ends the broker with sig under load and starts it again
// after gap, then checks that the load recovers and nothing is lost.
func restartBroker(t *testing.T, sig syscall.Signal, gap time.Duration) {
	t.Helper()
	e := shared
	l := loadBeforeFault(t, e, rate, 20, localstack.BrokerName)

	down := time.Now()
	must(t, e, e.stack.StopComponent(localstack.BrokerName, sig))
	time.Sleep(gap) // the fault's length is the point of the test
	must(t, e, e.stack.StartComponent(t.Context(), localstack.BrokerName))
	up := time.Now()
	recovered := waitFor(t, e, 60*time.Second, "a 200 after the broker's restart", func() bool { return l.Stats().LastSuccess.After(up) })
	moreAcknowledged(t, e, l, 50, 60*time.Second, "load after the restart")

	st, c := finish(t, e, l)
	t.Logf("figure: broker ended with %v, down %s; first 200 %s after it was back; failed attempts, all retried: %v; %s",
		sig, up.Sub(down).Round(time.Millisecond), recovered.Round(time.Millisecond), failures(st), c)
}

// TestBrokerUnreachable freezes the broker for 30 s with SIGSTOP, so that
// its connections hang as in a network partition, then lets it go on.
// The broker tests run first: the tests after them also show that the
// consumer group recovered whole (each needs every partition read).
func TestBrokerUnreachable(t *testing.T) {
	e := shared
	l := loadBeforeFault(t, e, rate, 20, localstack.BrokerName)

	must(t, e, e.stack.Signal(localstack.BrokerName, syscall.SIGSTOP))
	frozen := time.Now()
	// Requests under way when the broker froze may still be acknowledged
	// within the produce timeout (5 s); after that, nothing can be.
	time.Sleep(7 * time.Second) // the fault's length is the point of the test
	before := l.Stats()
	time.Sleep(30*time.Second - time.Since(frozen))
	during := l.Stats()
	must(t, e, e.stack.Signal(localstack.BrokerName, syscall.SIGCONT))
	thawed := time.Now()

	if during.Acknowledged != before.Acknowledged {
		t.Errorf("%d batches acknowledged while the broker was frozen", during.Acknowledged-before.Acknowledged)
	}
	if n := during.Answers["503"] - before.Answers["503"]; n == 0 {
		t.Errorf("no 503 while the broker was frozen; answers %v", during.Answers)
	}
	recovered := waitFor(t, e, 60*time.Second, "a 200 after the broker came back", func() bool { return l.Stats().LastSuccess.After(thawed) })
	moreAcknowledged(t, e, l, 50, 60*time.Second, "load after the outage")

	st, c := finish(t, e, l)
	t.Logf("figure: broker unreachable %s; %d answers 503 during it, none 200 after the produce timeout; first 200 %s after it returned; longest wait for a batch %s; %s",
		thawed.Sub(frozen).Round(time.Second), during.Answers["503"]-before.Answers["503"], recovered.Round(time.Millisecond), st.LongestWait.Round(time.Millisecond), c)
}

// TestConsumerKilledTwice kills the consumer with SIGKILL twice under
// load; ingest must not notice, and the restarted consumer must write
// everything, duplicates collapsing after deduplication.
func TestConsumerKilledTwice(t *testing.T) {
	e := shared
	l := loadBeforeFault(t, e, rate, 20, localstack.ConsumerName)

	for range 2 {
		must(t, e, e.stack.StopComponent(localstack.ConsumerName, syscall.SIGKILL))
		moreAcknowledged(t, e, l, 50, 30*time.Second, "load while the consumer is down")
		must(t, e, e.stack.StartComponent(t.Context(), localstack.ConsumerName))
		moreAcknowledged(t, e, l, 30, 30*time.Second, "load after the consumer's restart")
	}
	st, c := finish(t, e, l)
	if st.Failures() != 0 {
		t.Errorf("ingest failed %d attempts while only the consumer was down: %v", st.Failures(), st.Answers)
	}
	t.Logf("figure: consumer killed twice; ingest answered %v; %s", st.Answers, c)
}

// TestClickHouseRestarted stops ClickHouse for 10 s under load.
func TestClickHouseRestarted(t *testing.T) {
	e := shared
	l := loadBeforeFault(t, e, rate, 20, localstack.ClickHouseName)

	must(t, e, e.stack.StopComponent(localstack.ClickHouseName, syscall.SIGTERM))
	down := time.Now()
	moreAcknowledged(t, e, l, 10*rate/20, 60*time.Second, "load while ClickHouse is down")
	must(t, e, e.stack.StartComponent(t.Context(), localstack.ClickHouseName))
	outage := time.Since(down)
	moreAcknowledged(t, e, l, 50, 30*time.Second, "load after ClickHouse's return")

	st, c := finish(t, e, l)
	if st.Failures() != 0 {
		t.Errorf("ingest failed %d attempts while only ClickHouse was down: %v", st.Failures(), st.Answers)
	}
	t.Logf("figure: ClickHouse down %s; ingest answered %v; %s", outage.Round(time.Second), st.Answers, c)
}

// TestIngestStoppedWithRequestsInFlight sends ingest SIGTERM while
// requests are under way: each request is answered 200 with its events
// stored, or fails and is retried once ingest is back.
func TestIngestStoppedWithRequestsInFlight(t *testing.T) {
	e := shared
	l := loadBeforeFault(t, e, 4*rate, 50, localstack.IngestName)

	waitFor(t, e, 10*time.Second, "requests in flight", func() bool { return l.Stats().InFlight > 0 })
	before := l.Stats()
	must(t, e, e.stack.StopComponent(localstack.IngestName, syscall.SIGTERM))
	stopped := l.Stats()
	must(t, e, e.stack.StartComponent(t.Context(), localstack.IngestName))
	moreAcknowledged(t, e, l, 100, 60*time.Second, "load after ingest's restart")

	st, c := finish(t, e, l)
	drained := stopped.Answers["200"] - before.Answers["200"]
	t.Logf("figure: SIGTERM with %d requests in flight; %d answered 200 while ingest drained; failed attempts during the restart, all retried: %v; %s",
		before.InFlight, drained, failures(st), c)
}

// loadBeforeFault starts the load at eventsPerSecond, waits until n batches are
// acknowledged and has component running again when the test ends.
func loadBeforeFault(t *testing.T, e *env, eventsPerSecond float64, n int64, component string) *delivery.Load {
	t.Helper()
	l := startLoad(t, e, eventsPerSecond)
	moreAcknowledged(t, e, l, n, 30*time.Second, "load before the fault")
	restartOnFailure(t, e, component)
	return l
}

// failures are the attempts not answered 200, by status.
func failures(st delivery.Stats) map[string]int64 {
	f := map[string]int64{}
	for k, v := range st.Answers {
		if k != "200" {
			f[k] = v
		}
	}
	return f
}
