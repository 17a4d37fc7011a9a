package config

import (
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// QueryLogClasses are the classes of response the query log can be
// limited to, as CoreDNS's log plugin names them.
var QueryLogClasses = []string{"all", "success", "denial", "error"}

// validateQueryLog checks the query log's names and classes under key,
// and makes the names fully qualified and lower-case, as the query path
// compares them.
func validateQueryLog(bad func(key, format string, args ...any), key string, l *LogConfig) {
	checkZones(bad, key+".queryNames", l.QueryNames, true)
	fqdnAll(l.QueryNames)
	for _, c := range l.QueryClasses {
		if !slices.Contains(QueryLogClasses, c) {
			bad(key+".queryClasses", "must be all, success, denial or error, got %q", c)
		}
	}
	validateConsolidate(bad, key+".errorsConsolidate", l.ErrorsConsolidate)
	if !l.Queries && (len(l.QueryNames) > 0 || len(l.QueryClasses) > 0 || l.QueryFormat != "") {
		bad(key+".queries", "is false: queryNames, queryClasses and queryFormat shape a query log that is off")
	}
}

// fqdnAll makes every name of zones lower-case and fully qualified, in
// place, as the query path compares names.
func fqdnAll(zones []string) {
	for i, z := range zones {
		zones[i] = dns.Fqdn(strings.ToLower(z))
	}
}
