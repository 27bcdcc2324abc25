package idempotency

import (
	"fmt"
	"net/http"
	"strings"
)

// neverStored are the response headers no configuration stores: a cookie
// set for one client must never be replayed.
var neverStored = []string{"Set-Cookie", "Set-Cookie2"}

// headerSet is Config.ReplayHeaders parsed: canonical names, and the
// canonical prefixes of the patterns ending in "*".
type headerSet struct {
	names    map[string]bool
	prefixes []string
}

// newHeaderSet parses list, refusing an entry that is not a header name or
// a name prefix ending in "*", and any that would store Set-Cookie.
func newHeaderSet(list []string) (headerSet, error) {
	hs := headerSet{names: map[string]bool{}}
	for _, h := range list {
		prefix, wild := strings.CutSuffix(h, "*")
		if (prefix == "" && !wild) || !isToken(prefix) {
			return hs, fmt.Errorf("idempotency: Config.ReplayHeaders: %q is not a header name or a name prefix ending in *", h)
		}
		c := http.CanonicalHeaderKey(prefix)
		for _, never := range neverStored {
			if c == never || (wild && strings.HasPrefix(never, c)) {
				return hs, fmt.Errorf("idempotency: Config.ReplayHeaders: %q would store %s: a cookie is never stored or replayed", h, never)
			}
		}
		if wild {
			hs.prefixes = append(hs.prefixes, c)
		} else {
			hs.names[c] = true
		}
	}
	return hs, nil
}

// has reports whether the header name (canonical) is stored.
func (hs headerSet) has(name string) bool {
	for _, never := range neverStored {
		if name == never {
			return false
		}
	}
	if hs.names[name] {
		return true
	}
	for _, p := range hs.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// isToken reports whether s is made of RFC 9110 token characters (a
// header name's); "" is one, as the prefix of the pattern "*".
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
