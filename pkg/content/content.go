// Package content holds the content model shared by the api and ingest
// services (organizations, apps and access tokens) and the Store contract
// every backend implements.
package content

import (
	"context"
	"errors"
	"time"
)

// Errors returned by every Store implementation. Callers test them with
// errors.Is; implementations wrap them with detail.
var (
	// ErrNotFound means the record asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a record with the same identifier already exists.
	ErrConflict = errors.New("already exists")
)

// Organization owns apps and organization-level tokens.
type Organization struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// App is one assistant application. Channels and other descriptive fields
// arrive with the content API; for now an app is its identity and owner.
type App struct {
	ID             string
	OrganizationID string
	Name           string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Token is a stored access token. The secret itself is never stored: Hash is
// the SHA-256 of the full token string.
type Token struct {
	ID             string
	Hash           []byte
	OrganizationID string
	// AppID is empty for an organization-level token.
	AppID     string
	Name      string
	CreatedAt time.Time
	// RevokedAt is zero while the token is active.
	RevokedAt time.Time
}

// Revoked reports whether the token has been revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// TokenFilter narrows ListTokens. Empty fields match everything.
type TokenFilter struct {
	OrganizationID string
	AppID          string
}

// Store is the content database. Implementations must be safe for
// concurrent use and must pass the suite in package contenttest.
type Store interface {
	CreateOrganization(ctx context.Context, org Organization) error
	Organization(ctx context.Context, id string) (Organization, error)
	ListOrganizations(ctx context.Context) ([]Organization, error)

	// CreateApp fails with ErrNotFound when the organization does not exist.
	CreateApp(ctx context.Context, app App) error
	App(ctx context.Context, id string) (App, error)
	ListApps(ctx context.Context, organizationID string) ([]App, error)

	// CreateToken fails with ErrNotFound when the organization or app does
	// not exist, or when the app belongs to another organization.
	CreateToken(ctx context.Context, tok Token) error
	Token(ctx context.Context, id string) (Token, error)
	// ListTokens returns tokens ordered by creation time, then ID.
	ListTokens(ctx context.Context, f TokenFilter) ([]Token, error)
	// RevokeToken marks the token revoked at the given time. Revoking a
	// revoked token keeps the first revocation time and is not an error.
	RevokeToken(ctx context.Context, id string, at time.Time) error

	Close() error
}
