package redrive_test

import (
	"fmt"

	"github.com/sqsonce/sqsonce/redrive"
)

// Filters are parsed from short expressions; all of a list must match.
func ExampleParseFilter() {
	for _, expr := range []string{"class=permanent,max_attempts", "error~timeout", "attr:tenant=acme", "json:order.status=failed", "age>7d", "colour=red"} {
		f, err := redrive.ParseFilter(expr)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(f.Kind, f.Name, f.Op, f.Value)
	}
	// Output:
	// class  = permanent,max_attempts
	// error  ~ timeout
	// attr tenant = acme
	// json order.status = failed
	// age  > 7d
	// error: redrive: bad filter "colour=red": unknown kind "colour" (want class, error, attr, body, json, age, id, group or source)
}
