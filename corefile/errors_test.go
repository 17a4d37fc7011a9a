package corefile

import (
	"reflect"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
)

// errors' consolidate options convert to log.errorsConsolidate rules in
// order; what CoreDNS would refuse is named.
func TestConvertErrorsConsolidate(t *testing.T) {
	src := ".:53 {\n  errors {\n    consolidate 30s \"^read udp .* i/o timeout$\" warning\n" +
		"    consolidate 5m ^failed show_first\n    consolidate 1m x loud\n    stacktrace\n  }\n}\n"
	_, res := convertWith(t, src, nil)
	want := []config.ConsolidateConfig{
		{Window: config.Duration(30 * time.Second), Pattern: "^read udp .* i/o timeout$", Level: "warn"},
		{Window: config.Duration(5 * time.Minute), Pattern: "^failed", ShowFirst: true},
	}
	if got := res.Config.Log.ErrorsConsolidate; !reflect.DeepEqual(got, want) {
		t.Errorf("errorsConsolidate %+v, want %+v", got, want)
	}
	var unmapped []string
	for _, f := range res.Findings {
		if f.Unmapped {
			unmapped = append(unmapped, f.Format("Corefile"))
		}
	}
	wantUnmapped := []string{
		"Corefile:5: errors consolidate level loud: CoreDNS knows warning, error, info and debug",
		`Corefile:6: errors option "stacktrace" has no shardns equivalent`,
	}
	if !reflect.DeepEqual(unmapped, wantUnmapped) {
		t.Errorf("unmapped %q, want %q", unmapped, wantUnmapped)
	}
}
