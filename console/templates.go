package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/sqsonce/sqsonce/internal/printable"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// staticHandler serves the console's script and style sheet.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.FileServerFS(sub)
}

// templates holds one template set per page, each with the layout.
type templates struct {
	pages map[string]*template.Template
}

// pageNames are the page templates (templates/NAME.html).
var pageNames = []string{"overview", "dlq", "message", "plan", "delete", "job", "outbox", "keys", "error"}

// funcs are the template functions. html/template escapes everything for
// its context; show and lines also escape what a terminal or a bidi
// algorithm would act on (printable), so a reason holding U+202E cannot
// reorder what a person reads.
var funcs = template.FuncMap{
	"show":  printable.Escape,
	"lines": printable.Lines,
	"cut":   cut,
	"age":   ageText,
	"when":  whenText,
	"count": countText,
}

func parseTemplates() (*templates, error) {
	t := &templates{pages: map[string]*template.Template{}}
	for _, name := range pageNames {
		p, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		t.pages[name] = p
	}
	return t, nil
}

// page is what every page template gets.
type page struct {
	Title     string
	Base      string
	CSRF      string
	ReadOnly  bool
	HasOutbox bool
	HasKeys   bool
	Data      any
}

// render executes a page into a buffer first, so that a template error
// is a clean 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, status int, name, title string, data any) {
	p := page{Title: title, Base: c.cfg.BasePath, CSRF: c.csrf, ReadOnly: c.cfg.ReadOnly,
		HasOutbox: c.cfg.Outbox != nil, HasKeys: c.cfg.Keys != nil, Data: data}
	var buf bytes.Buffer
	if err := c.tpl.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.log.Error("console: render", zap.String("page", name), zap.Error(err))
		http.Error(w, "500 internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders the error page: what went wrong, escaped like any outside
// text (errors carry queue names and servers' words).
func (c *Console) fail(w http.ResponseWriter, status int, what string, err error) {
	msg := what
	if err != nil {
		msg += ": " + err.Error()
	}
	c.render(w, status, "error", http.StatusText(status), struct {
		Status  int
		Message string
	}{status, msg})
}

// cut shortens s to at most n bytes at a rune boundary, marking a cut with
// "…".
func cut(n int, s string) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// ageText formats an age for people as sqs-redrive does (a Go duration
// that its --older-than reads back): to the second under an hour, to the
// minute above; "-" for none.
func ageText(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// whenText formats a time in UTC, "-" for none.
func whenText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// countText formats an approximate count; an unknown one (-1) shows as
// "?".
func countText(n int) string {
	if n < 0 {
		return "?"
	}
	return strconv.Itoa(n)
}
