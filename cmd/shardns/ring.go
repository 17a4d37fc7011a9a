package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/shardns/shardns/httpapi"
)

// ring prints a replica's /debug/ring: as a table, or with --view as
// bars, redrawn every --every while standard output is a terminal.
func ring(args []string) error {
	fl := flag.NewFlagSet("ring", flag.ContinueOnError)
	addr := fl.String("http", "127.0.0.1:8080", "http.listen address of a replica")
	view := fl.Bool("view", false, "draw each member's zones and the handoffs in flight as bars")
	every := fl.Duration("every", 2*time.Second, "with --view on a terminal, how often to redraw; 0 draws once")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}
	if *every < 0 {
		return fmt.Errorf("--every %s: want a positive duration, or 0 to draw once", *every)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	// Ctrl-C ends a redrawing view, and a read under way, at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if !*view {
		r, err := fetchRing(ctx, client, *addr)
		if err != nil {
			return err
		}
		return printRingTable(os.Stdout, r)
	}
	fd := int(os.Stdout.Fd())
	if !term.IsTerminal(fd) || *every == 0 {
		r, err := fetchRing(ctx, client, *addr)
		if err != nil {
			return err
		}
		return renderRingView(os.Stdout, r, ringViewStyle{Width: 100})
	}
	return watchRing(ctx, os.Stdout, *every, func() (httpapi.Ring, error) { return fetchRing(ctx, client, *addr) },
		func() int {
			if w, _, err := term.GetSize(fd); err == nil && w > 20 {
				return w
			}
			return 100
		})
}

// fetchRing reads addr's /debug/ring, giving up when ctx ends.
func fetchRing(ctx context.Context, client *http.Client, addr string) (httpapi.Ring, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/ring", nil)
	if err != nil {
		return httpapi.Ring{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return httpapi.Ring{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// 403: /debug/ring is served to the replica's own host and the
		// networks of its http.debug only.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return httpapi.Ring{}, fmt.Errorf("%s/debug/ring: %s", addr, strings.TrimSpace(string(body)))
	}
	var r httpapi.Ring
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return httpapi.Ring{}, fmt.Errorf("%s/debug/ring: %w", addr, err)
	}
	return r, nil
}

// printRingTable prints r as the tables `shardns ring` always printed.
func printRingTable(out io.Writer, r httpapi.Ring) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "MEMBER\tREMOTE\tOWNER\n")
	for _, m := range r.Members {
		me := ""
		if m.Name == r.Self {
			me = " (this replica)"
		}
		if m.Down {
			me = " (down: its remote port refuses connections)"
		}
		fmt.Fprintf(w, "%s%s\t%s\t%v\n", m.Name, me, m.Remote, m.Owner)
	}
	fmt.Fprintf(w, "\nZONE\tOWNERS\tSERVED HERE\n")
	keys := make([]string, 0, len(r.Zones))
	for k := range r.Zones {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s\t%s\t%v\n", k, strings.Join(r.Zones[k], ","), slices.Contains(r.Served, k))
	}
	if len(r.Rejected) > 0 {
		fmt.Fprintf(w, "\nREJECTED\tNAME\tREASON\tCOUNT\tLAST\n")
		for _, rej := range r.Rejected {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", rej.Addr, rej.Name, rej.Reason, rej.Count, rej.Last.Format(time.RFC3339))
		}
	}
	return w.Flush()
}

// watchRing redraws the ring every interval until ctx ends: the screen
// is cleared and drawn again whole, so a member that left disappears. A
// failed read keeps the last picture under a line saying why.
func watchRing(ctx context.Context, out io.Writer, every time.Duration, read func() (httpapi.Ring, error), width func() int) error {
	var last *httpapi.Ring
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var b bytes.Buffer
		b.WriteString(ansiHome)
		r, err := read()
		if ctx.Err() != nil {
			return nil // ended while reading: the last picture stays
		}
		if err == nil {
			last = &r
		}
		style := ringViewStyle{Color: true, Width: width()}
		if err != nil {
			fmt.Fprintf(&b, "%scannot read the ring: %s%s\n", ansiError, sanitize(err.Error()), ansiReset)
		}
		if last != nil {
			renderRingView(&b, *last, style)
		}
		fmt.Fprintf(&b, "\n%sread at %s; every %s; Ctrl-C ends%s\n", ansiDim, time.Now().Format(time.TimeOnly), every, ansiReset)
		if _, err := out.Write(b.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
