package benchtsv

import (
	"strconv"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	parseN := func(r Record) (int, error) { return strconv.Atoi(r.Get("n")) }
	for _, tc := range []struct {
		name, in string
		want     []int
		err      string
	}{
		{name: "extra columns and blank lines", in: "x\tn\n1\t5\n\n2\t7\n", want: []int{5, 7}},
		{name: "empty", in: "", err: "no header line"},
		{name: "missing column", in: "x\n1\n", err: `header has no column "n"`},
		{name: "short row", in: "x\tn\n1\n", err: "line 2: 1 fields, the header has 2"},
		{name: "bad value", in: "n\nfive\n", err: `line 2: strconv.Atoi: parsing "five"`},
		{name: "no rows", in: "n\n", err: "no rows after the header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read(strings.NewReader(tc.in), []string{"n"}, parseN)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] || got[1] != tc.want[1] {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, -3: 1, 0.7: 1, 1.3: 2, 2.2: 2.5, 3: 5, 7: 10, 180: 200, 2400: 2500} {
		if got := NiceCeil(v); got != want {
			t.Errorf("NiceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}
