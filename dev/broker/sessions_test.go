package main

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestLapsed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stable := func(members ...string) *kfake.GroupInfo {
		g := &kfake.GroupInfo{Group: "g", State: "Stable"}
		for _, m := range members {
			g.Members = append(g.Members, kfake.GroupMember{MemberID: m})
		}
		return g
	}
	tests := []struct {
		name    string
		timeout int32                    // the session timeout joins asked for, in ms
		seen    map[string]time.Duration // member → how long before now a request named it
		group   *kfake.GroupInfo
		want    []string
	}{
		{"heartbeating members stay", 10000, map[string]time.Duration{"a": time.Second, "b": 9 * time.Second}, stable("a", "b"), nil},
		{"silent past the timeout", 10000, map[string]time.Duration{"a": time.Second, "b": 11 * time.Second}, stable("a", "b"), []string{"b"}},
		{"first sight starts the clock", 10000, map[string]time.Duration{"a": time.Second}, stable("a", "new"), nil},
		{"no timeout asked for, none judged", 0, map[string]time.Duration{"a": time.Minute}, stable("a"), nil},
		{"a rebalancing group is left to the broker", 10000, map[string]time.Duration{"a": time.Minute},
			&kfake.GroupInfo{Group: "g", State: "PreparingRebalance", Members: []kfake.GroupMember{{MemberID: "a"}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newMemberWatch(slog.New(slog.DiscardHandler))
			w.observe(t0, &kmsg.JoinGroupRequest{Group: "g", SessionTimeoutMillis: tt.timeout})
			for m, ago := range tt.seen {
				w.observe(t0.Add(-ago), &kmsg.HeartbeatRequest{Group: "g", MemberID: m})
			}
			if got := w.lapsed(tt.group, t0); !slices.Equal(got, tt.want) {
				t.Errorf("lapsed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLapsedForgetsMembersThatLeft(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newMemberWatch(slog.New(slog.DiscardHandler))
	w.observe(t0, &kmsg.JoinGroupRequest{Group: "g", SessionTimeoutMillis: 10000})
	w.observe(t0, &kmsg.HeartbeatRequest{Group: "g", MemberID: "gone"})
	w.observe(t0, &kmsg.HeartbeatRequest{Group: "other", MemberID: "kept"})
	w.lapsed(&kfake.GroupInfo{Group: "g", State: "Stable"}, t0)
	if _, ok := w.seen[memberKey{"g", "gone"}]; ok {
		t.Error("a member no longer in its group is still remembered")
	}
	if _, ok := w.seen[memberKey{"other", "kept"}]; !ok {
		t.Error("a member of another group was forgotten")
	}
}

// TestMemberWhoseJoinAnswerIsLost reproduces the defect the watch works
// around, against kfake over TCP: a consumer's JoinGroup waits for a
// rebalance and its connection closes before the answer. First without
// the watch, to show that the dead member keeps its partitions for good;
// kfake notices a closed connection only at random (the answer races the
// connection's end in a select), so that takes up to 12 tries. Then the
// watch starts, and the live consumer gets every partition back and reads
// from each.
func TestMemberWhoseJoinAnswerIsLost(t *testing.T) {
	const (
		topic      = "events"
		group      = "readers"
		partitions = 6
		attempts   = 12
		session    = time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic), kfake.GroupMinSessionTimeout(session/2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{addr}, GroupID: group, Topic: topic, StartOffset: kafka.FirstOffset,
		SessionTimeout: session, RebalanceTimeout: session, HeartbeatInterval: session / 5, MaxWait: 100 * time.Millisecond,
	})
	defer r.Close()
	read := make(chan int, 100)
	go func() {
		for {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				return
			}
			read <- m.Partition
		}
	}()
	alone := func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == 1 && g.NumAssigned() == partitions
	}
	if _, err := c.WaitGroupInfo(ctx, group, alone); err != nil {
		t.Fatalf("the reader never held every partition: %v", err)
	}

	for attempt := 1; ; attempt++ {
		if attempt > attempts {
			t.Fatalf("kfake removed the dead member by itself %d times: the watch may no longer be needed", attempts)
		}
		joinAndHangUp(t, addr, group, topic, session)
		// Nothing to await: the point is that nothing changes after
		// the dead member's session has long lapsed.
		time.Sleep(3 * session)
		info, err := c.WaitGroupInfo(ctx, group, func(g *kfake.GroupInfo) bool { return g != nil && g.State == "Stable" })
		if err != nil {
			t.Fatal(err)
		}
		if dead := slices.IndexFunc(info.Members, func(m kfake.GroupMember) bool { return m.ClientID == "killed" }); dead >= 0 && info.Members[dead].NumAssigned() > 0 {
			t.Logf("attempt %d: a dead member holds partitions after 3 session timeouts: %+v", attempt, info)
			break
		}
	}

	w := newMemberWatch(slog.New(slog.NewTextHandler(t.Output(), nil)))
	w.install(c)
	w.observe(time.Now(), &kmsg.JoinGroupRequest{Group: group, SessionTimeoutMillis: int32(session.Milliseconds())})
	go w.run(ctx, c, addr, session/10)
	if _, err := c.WaitGroupInfo(ctx, group, alone); err != nil {
		t.Fatalf("the dead member was not removed: %v", err)
	}
	if w.removed.Load() != 1 {
		t.Errorf("the watch removed %d members, want 1", w.removed.Load())
	}
	produceToEach(ctx, t, addr, topic, partitions)
	got := map[int]bool{}
	for len(got) < partitions {
		select {
		case p := <-read:
			got[p] = true
		case <-ctx.Done():
			t.Fatalf("read from partitions %v only", got)
		}
	}
}

// joinAndHangUp sends a JoinGroup as kafka-go does (version 1, no member
// ID) and closes the connection without waiting for the answer, as a
// consumer killed during a rebalance does.
func joinAndHangUp(t *testing.T, addr, group, topic string, session time.Duration) {
	t.Helper()
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{topic}}
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(1)
	req.Group = group
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(session.Milliseconds())
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("killed")).AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
}

func produceToEach(ctx context.Context, t *testing.T, addr, topic string, partitions int) {
	t.Helper()
	w := &kafka.Writer{
		Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { p, _ := strconv.Atoi(string(m.Key)); return p }),
	}
	defer w.Close()
	var msgs []kafka.Message
	for p := range partitions {
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(p)), Value: []byte("event")})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}
