package auth

import "github.com/assistantcms/cms/pkg/content"

// The scopes of the event pipeline's routes, named here so that the
// pipeline checks a token through this package and needs nothing of the
// content model (tokens and their scopes are stored with the content).
const (
	// EventsWrite: sending events.
	EventsWrite = content.EventsWrite
	// EventsRead: reading events back.
	EventsRead = content.EventsRead
)
