package console

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// cookieName is the cookie that carries the token after the first visit.
const cookieName = "sqsonce_console"

// headerToken and headerCSRF carry the token and the CSRF token for
// scripts and tools that send headers instead of a cookie and a form.
const (
	headerToken = "X-Console-Token"
	headerCSRF  = "X-CSRF-Token"
)

// same compares two secrets in constant time.
func same(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// authenticated checks the token: in the X-Console-Token header or the
// cookie; or, on a GET, in the query, which sets the cookie and redirects
// to the same page without the token (so that it leaves no trace in the
// history or a Referer). Without it the answer is 401.
func (c *Console) authenticated(w http.ResponseWriter, r *http.Request) bool {
	if t := r.Header.Get(headerToken); t != "" && same(t, c.cfg.Token) {
		return true
	}
	if ck, err := r.Cookie(cookieName); err == nil && same(ck.Value, c.cfg.Token) {
		return true
	}
	if t := r.URL.Query().Get("token"); t != "" && same(t, c.cfg.Token) && r.Method == http.MethodGet {
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: c.cfg.Token, Path: c.link("/"),
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		q := r.URL.Query()
		q.Del("token")
		// One leading slash, never "//" or "/\": the redirect stays on this
		// host (a browser reads those as another host's address).
		u := url.URL{Path: c.link("/" + strings.TrimLeft(r.URL.Path, "/\\")), RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("401 unauthorized: open the console with the URL it printed (it carries ?token=…)\n"))
	return false
}

// csrfOK checks a state-changing request: it must carry the CSRF token
// (the form field csrf or the X-CSRF-Token header), and must not come
// from another site (Sec-Fetch-Site, where the browser sends it).
func (c *Console) csrfOK(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	t := r.Header.Get(headerCSRF)
	if t == "" {
		t = r.PostFormValue("csrf")
	}
	return t != "" && same(t, c.csrf)
}
