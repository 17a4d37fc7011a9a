package trust

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// grpcMessage is a gRPC message header declaring n bytes, and body.
func grpcMessage(n uint32, body []byte) []byte {
	b := make([]byte, grpcPrefixLen, grpcPrefixLen+len(body))
	binary.BigEndian.PutUint32(b[1:], n)
	return append(b, body...)
}

// clientBytes is what a client writes: the preface, then frames made by
// write.
func clientBytes(t testing.TB, write func(fr *http2.Framer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	write(fr)
	return buf.Bytes()
}

// The scanner follows gRPC messages through DATA frames however the
// bytes are cut: a header split between frames, padding, several streams
// at once, streams that end; and stops at the first header over the
// limit, not before.
func TestMessageScanner(t *testing.T) {
	t.Parallel()
	const limit = 100
	for _, tc := range []struct {
		name  string
		write func(fr *http2.Framer)
		err   bool
	}{
		{"messages within the limit", func(fr *http2.Framer) {
			fr.WriteSettings()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}, EndHeaders: true})
			fr.WriteData(1, false, append(grpcMessage(100, make([]byte, 100)), grpcMessage(3, []byte("abc"))...))
			fr.WritePing(false, [8]byte{})
		}, false},
		{"a header over the limit", func(fr *http2.Framer) {
			fr.WriteData(1, false, grpcMessage(101, nil))
		}, true},
		{"a header split between frames", func(fr *http2.Framer) {
			m := grpcMessage(2<<20, nil)
			fr.WriteData(1, false, m[:2])
			fr.WriteData(3, false, grpcMessage(1, []byte("x")))
			fr.WriteData(1, false, m[2:])
		}, true},
		{"a body that looks like a header", func(fr *http2.Framer) {
			body := grpcMessage(1<<30, make([]byte, 50))
			fr.WriteData(1, false, grpcMessage(uint32(len(body)), body))
		}, false},
		{"a header after a body spread over frames", func(fr *http2.Framer) {
			fr.WriteData(1, false, grpcMessage(60, make([]byte, 30)))
			fr.WriteData(1, false, make([]byte, 30))
			fr.WriteData(1, false, grpcMessage(1000, nil))
		}, true},
		{"padding is not data", func(fr *http2.Framer) {
			fr.WriteDataPadded(1, false, grpcMessage(2, []byte("ab")), []byte{0xff, 0xff, 0xff, 0xff, 0xff})
			fr.WriteDataPadded(1, false, grpcMessage(3, []byte("abc")), make([]byte, 200))
		}, false},
		{"a header in a padded frame", func(fr *http2.Framer) {
			fr.WriteDataPadded(1, false, grpcMessage(500, nil), make([]byte, 10))
		}, true},
		{"a stream that ended starts again", func(fr *http2.Framer) {
			fr.WriteData(1, true, grpcMessage(50, make([]byte, 10))) // cut short, then ended
			fr.WriteData(1, false, grpcMessage(3, []byte("abc")))
			fr.WriteData(3, false, grpcMessage(50, make([]byte, 10)))
			fr.WriteRSTStream(3, http2.ErrCodeCancel)
			fr.WriteData(3, false, grpcMessage(3, []byte("abc")))
		}, false},
		{"more streams open than any client keeps", func(fr *http2.Framer) {
			for id := uint32(1); id < 2*maxTrackedStreams+3; id += 2 {
				fr.WriteData(id, false, grpcMessage(10, nil))
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := clientBytes(t, tc.write)
			whole := (&messageScanner{limit: limit}).feed(b)
			if (whole != nil) != tc.err {
				t.Fatalf("error %v, want one: %v", whole, tc.err)
			}
			bytewise := &messageScanner{limit: limit}
			var err error
			for i := 0; i < len(b) && err == nil; i++ {
				err = bytewise.feed(b[i : i+1])
			}
			if (err != nil) != tc.err {
				t.Fatalf("fed a byte at a time: error %v, want one: %v", err, tc.err)
			}
		})
	}
	var tooLarge *MessageTooLargeError
	err := (&messageScanner{limit: limit}).feed(clientBytes(t, func(fr *http2.Framer) { fr.WriteData(1, false, grpcMessage(2<<20, nil)) }))
	if !errors.As(err, &tooLarge) || tooLarge.Declared != 2<<20 || tooLarge.Limit != limit {
		t.Fatalf("error %v, want the declared size and the limit", err)
	}
	if err := (&messageScanner{limit: limit}).feed(append([]byte(http2.ClientPreface), 0, 0, 0, 0, 0x8, 0, 0, 0, 1)); !errors.Is(err, errPadding) {
		t.Fatalf("a padded DATA frame without its pad length: %v", err)
	}
}

// FuzzMessageScanner: whatever a client sends and however the reads cut
// it, the scanner does not panic and decides as it does on the whole.
func FuzzMessageScanner(f *testing.F) {
	f.Add(clientBytes(f, func(fr *http2.Framer) {
		fr.WriteSettings()
		fr.WriteData(1, false, grpcMessage(4, []byte("abcd")))
		fr.WriteDataPadded(3, true, grpcMessage(9, []byte("abc")), []byte{0, 0})
	}), uint16(7))
	f.Add(clientBytes(f, func(fr *http2.Framer) { fr.WriteData(1, false, grpcMessage(1<<20, nil)) }), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		whole := (&messageScanner{limit: 64}).feed(b)
		s := &messageScanner{limit: 64}
		step := int(cut)%32 + 1
		var err error
		for i := 0; i < len(b) && err == nil; i += step {
			err = s.feed(b[i:min(i+step, len(b))])
		}
		if (err == nil) != (whole == nil) {
			t.Fatalf("in reads of %d bytes: %v; whole: %v", step, err, whole)
		}
	})
}

// Through a guarded gRPC server: a node-local process may send messages
// up to QuestionBytes and a replica up to MessageBytes; a node-local
// process that declares more, even within what a replica may send and
// without sending the message, has its connection closed at the header,
// counted as remote-limit.
func TestGuardLimitsMessagesByRole(t *testing.T) {
	t.Parallel()
	keys := [][]byte{testKey1}
	cred, err := NodeLocalCredential(keys)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[Role]map[string]string{RoleReplica: testRoutes, RoleNodeLocal: {"dispatch": testRoutes["dispatch"]}}
	rejections := NewRejections(nil, nil, time.Now)
	server, err := NewGuard(GuardConfig{Keys: keys, Admitted: func(netip.Addr) bool { return true },
		Routes: routes, Rejections: rejections, Limits: Limits{MessageBytes: 1 << 20, QuestionBytes: 16 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveRemoting(t, server)
	questions := func(bytes int) *remote.RemoteMessage {
		m := batch([]string{"shardns.wire.v1.ZoneQuery"}, []string{"dispatch"}, &remote.MessageEnvelope{MessageData: make([]byte, bytes)})
		m.GetMessageBatch().Senders = []*actor.PID{{Address: "127.0.0.1:1", Id: "dispatch-replies"}}
		return m
	}
	for _, tc := range []struct {
		name  string
		as    GuardConfig
		bytes int
		ok    bool
	}{
		{"a node-local batch within its limit", GuardConfig{Credential: &cred}, 12 << 10, true},
		{"a node-local batch over its limit", GuardConfig{Credential: &cred}, 20 << 10, false},
		{"a replica batch within its limit", GuardConfig{Keys: keys}, 900 << 10, true},
		{"a replica batch over its limit", GuardConfig{Keys: keys}, 1100 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.as.Admitted = func(netip.Addr) bool { return true }
			client, err := NewGuard(tc.as)
			if err != nil {
				t.Fatal(err)
			}
			err = sendOne(t, client, addr, questions(tc.bytes))
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("accepted")
			}
		})
	}
	before := countReason(rejections, ReasonRemoteLimit)
	id := mustNodeLocal(t, cred)
	closed := make(chan error, 1)
	go func() { closed <- declareOnly(addr, id.Client, questions(2<<10), 900<<10) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a node-local stream declaring 900 KiB and sending none of it was held for 10 s")
	}
	if after := countReason(rejections, ReasonRemoteLimit); after <= before {
		t.Errorf("the header over the limit was not counted as %s: %d, then %d", ReasonRemoteLimit, before, after)
	}
}

// countReason is how many refusals rs counted for reason.
func countReason(rs *Rejections, reason string) uint64 {
	var n uint64
	for _, r := range rs.List() {
		if r.Reason == reason {
			n += r.Count
		}
	}
	return n
}

// declareOnly opens a stream of protoactor's Receive method on the remote
// port at addr with client's TLS settings, sends first, then only the
// header of a message of declared bytes, and waits until the server
// closes the connection. It fails if the server reset the stream instead.
func declareOnly(addr string, client *tls.Config, first *remote.RemoteMessage, declared uint32) error {
	whole, err := proto.Marshal(first)
	if err != nil {
		return err
	}
	cfg := client.Clone()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(conn, conn)
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", receiveMethod},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return err
	}
	if err := errors.Join(fr.WriteSettings(),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr.Bytes(), EndHeaders: true}),
		fr.WriteData(1, false, grpcMessage(uint32(len(whole)), whole)), fr.WriteData(1, false, grpcMessage(declared, nil))); err != nil {
		return err
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return nil // closed
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			if err := fr.WriteSettingsAck(); err != nil {
				return nil
			}
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			return errors.New("the stream was reset: " + rst.ErrCode.String())
		}
	}
}
