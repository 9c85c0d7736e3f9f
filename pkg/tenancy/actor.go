package tenancy

import (
	"context"
	"errors"
	"time"
)

// ErrNoActor is returned by a store asked to change something without
// knowing who asks: every change is attributed (see WithActor).
var ErrNoActor = errors.New("a change needs its actor: who makes it (tokens) or the local user (commands)")

// Actor is who makes a change and from where. The HTTP edge fills it from
// the authenticated token and the connection, the admin commands from the
// local user; never from what a request says about itself.
type Actor struct {
	// TokenID and TokenName are the token's, for a request. Never the
	// secret.
	TokenID, TokenName string
	// LocalUser is the operating system user of an admin command.
	LocalUser string
	// ClientNet is the client's network (as rate limits key it), UserAgent
	// its User-Agent, RequestID the request's ID in the logs.
	ClientNet, UserAgent, RequestID string
}

type actorKey struct{}

type operationKey struct{}

// WithActor returns ctx carrying who makes the changes made with it.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns the actor ctx carries, and whether it carries one.
func ActorOf(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// WithOperation names the operation that changes made with ctx belong to,
// as the audit log shows it ("updateHandler", "import"); a store names it
// after its own method without one.
func WithOperation(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, operationKey{}, name)
}

// OperationOf returns the operation ctx names, or fallback.
func OperationOf(ctx context.Context, fallback string) string {
	if op, ok := ctx.Value(operationKey{}).(string); ok && op != "" {
		return op
	}
	return fallback
}

// AuditEntry is one operation in the audit log: who made it, when, from
// where, and what it changed. Entries are never edited; retention alone
// removes old ones.
type AuditEntry struct {
	ID             int64
	At             time.Time
	OrganizationID string
	// AppID is empty for an organization's token.
	AppID     string
	Operation string
	// Subject is what the operation names: a record ("handler/Hello"), a
	// token's ID; empty for a bulk operation.
	Subject string
	Actor   Actor
	// Counts of the records (and apps) the operation wrote.
	Created, Updated, Deleted, Unchanged int
}
