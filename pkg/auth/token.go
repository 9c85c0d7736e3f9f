// Package auth issues and checks access tokens and resolves which app a
// request acts for.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Token strings look like "cms_<id>_<secret>": the id is public (listed,
// used to revoke and to find the stored hash), the secret is 32 random bytes.
const (
	tokenPrefix = "cms_"
	idBytes     = 8
	secretBytes = 32
)

const (
	idLen     = 2 * idBytes             // hex
	secretLen = (secretBytes*8 + 5) / 6 // unpadded base64
	tokenLen  = len(tokenPrefix) + idLen + 1 + secretLen
)

// ErrMalformedToken means the string cannot be a token issued here.
var ErrMalformedToken = errors.New("malformed token")

// NewToken returns a fresh token string and its public id.
func NewToken() (token, id string, err error) {
	var raw [idBytes + secretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", fmt.Errorf("read random bytes for token: %w", err)
	}
	id = hex.EncodeToString(raw[:idBytes])
	token = tokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(raw[idBytes:])
	return token, id, nil
}

// ParseToken returns the id of a well-formed token string.
func ParseToken(token string) (id string, err error) {
	if len(token) != tokenLen || !strings.HasPrefix(token, tokenPrefix) || token[len(tokenPrefix)+idLen] != '_' {
		return "", ErrMalformedToken
	}
	id = token[len(tokenPrefix) : len(tokenPrefix)+idLen]
	if _, err := hex.DecodeString(id); err != nil {
		return "", ErrMalformedToken
	}
	return id, nil
}

// HashToken returns the digest stored for a token. Tokens carry 256 bits of
// randomness, so a fast hash is safe here; no password hashing is needed.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// HashMatches compares a stored digest with a token in constant time.
func HashMatches(stored []byte, token string) bool {
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(stored, sum[:]) == 1
}
