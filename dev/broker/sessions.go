package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberWatch removes consumer-group members whose session has lapsed but
// which kfake keeps.
//
// kfake starts a member's session timer only when an answer to its
// JoinGroup or SyncGroup is handed to the connection. If the connection
// closed while the JoinGroup waited for a rebalance (a consumer killed,
// or one that gave up on a frozen broker), kfake picks at random between
// handing the answer over and noticing the closed connection; in the
// second case no timer starts, and the member keeps whatever partitions
// the leader gives it: the group's live consumers never read them. Apache
// Kafka removes such a member once its session timeout passes; the watch
// does the same by sending LeaveGroup for it.
type memberWatch struct {
	log *slog.Logger
	// transport connects the watch to the broker as the broker requires
	// (TLS, SASL); nil is plaintext.
	transport kafka.RoundTripper
	// removed counts the members the watch removed.
	removed atomic.Int64

	mu sync.Mutex
	// timeouts holds each group's session timeout: the longest any of
	// its joins asked for.
	timeouts map[string]time.Duration
	// seen is when a request last named the member, or when the watch
	// first found it in its group.
	seen map[memberKey]time.Time
}

type memberKey struct{ group, member string }

func newMemberWatch(log *slog.Logger) *memberWatch {
	return &memberWatch{log: log, timeouts: map[string]time.Duration{}, seen: map[memberKey]time.Time{}}
}

// install makes c tell the watch about every request that keeps a
// member's session alive. The requests are only observed: kfake handles
// them as usual.
func (w *memberWatch) install(c *kfake.Cluster) {
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat} {
		c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			w.observe(time.Now(), req)
			return nil, nil, false
		})
	}
}

func (w *memberWatch) observe(now time.Time, req kmsg.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		w.timeouts[r.Group] = max(w.timeouts[r.Group], time.Duration(r.SessionTimeoutMillis)*time.Millisecond)
		if r.MemberID != "" {
			w.seen[memberKey{r.Group, r.MemberID}] = now
		}
	case *kmsg.SyncGroupRequest:
		w.seen[memberKey{r.Group, r.MemberID}] = now
	case *kmsg.HeartbeatRequest:
		w.seen[memberKey{r.Group, r.MemberID}] = now
	}
}

// groups lists the groups the watch has seen joins for.
func (w *memberWatch) groups() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.timeouts))
	for g := range w.timeouts {
		names = append(names, g)
	}
	return names
}

// lapsed returns the members of g that no request has named for longer
// than the group's session timeout, and forgets members g no longer has.
// Only a stable group is judged: during a rebalance members wait in
// JoinGroup without heartbeating, and kfake's own timers handle them. So
// is only a group whose joins asked for a session timeout.
func (w *memberWatch) lapsed(g *kfake.GroupInfo, now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	present := make(map[string]bool, len(g.Members))
	for _, m := range g.Members {
		present[m.MemberID] = true
	}
	for k := range w.seen {
		if k.group == g.Group && !present[k.member] {
			delete(w.seen, k)
		}
	}
	timeout := w.timeouts[g.Group]
	if g.State != "Stable" || timeout <= 0 {
		return nil
	}
	var out []string
	for _, m := range g.Members {
		k := memberKey{g.Group, m.MemberID}
		last, ok := w.seen[k]
		if !ok {
			w.seen[k] = now
			continue
		}
		if now.Sub(last) > timeout {
			out = append(out, m.MemberID)
		}
	}
	return out
}

// run checks every group each interval until ctx ends, and removes the
// members whose session lapsed through the broker at addr.
func (w *memberWatch) run(ctx context.Context, c *kfake.Cluster, addr string, interval time.Duration) {
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second, Transport: w.transport}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, group := range w.groups() {
			info := c.GroupInfo(group)
			if info == nil {
				w.forget(group)
				continue
			}
			for _, member := range w.lapsed(info, time.Now()) {
				w.remove(ctx, client, group, member)
			}
		}
	}
}

func (w *memberWatch) forget(group string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.timeouts, group)
	for k := range w.seen {
		if k.group == group {
			delete(w.seen, k)
		}
	}
}

func (w *memberWatch) remove(ctx context.Context, client *kafka.Client, group, member string) {
	resp, err := client.LeaveGroup(ctx, &kafka.LeaveGroupRequest{GroupID: group, Members: []kafka.LeaveGroupRequestMember{{ID: member}}})
	if err == nil {
		err = resp.Error
		for _, m := range resp.Members {
			err = errors.Join(err, m.Error)
		}
	}
	if errors.Is(err, kafka.UnknownMemberId) {
		return // gone meanwhile, which is what the watch wanted
	}
	if err != nil {
		w.log.Warn("remove a group member whose session lapsed", "group", group, "member", member, "err", err)
		return
	}
	w.removed.Add(1)
	w.log.Warn("removed a group member whose session lapsed without an answer reaching it", "group", group, "member", member)
}
