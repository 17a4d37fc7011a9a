package trust

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"golang.org/x/net/http2"
)

// gRPC reads the 5-byte header of a message (a flag and a length) and
// allocates the length it declares, up to the server's MaxRecvMsgSize,
// before the first byte of the message arrives (grpc-go 1.60:
// rpc_util.go, parser.recvMsg, p.recvBufferPool.Get(int(length))). The
// server's limit is one for every peer, and stream interceptors see a
// message only once it is whole. So the size a role may send is enforced
// on the connection itself: messageLimitConn reads the HTTP/2 frames the
// peer sends, follows the gRPC messages in each stream's DATA, and fails
// the read that completes a header declaring more than the peer's role
// may send, before gRPC sees that header. gRPC then closes the
// connection.

// maxTrackedStreams bounds the streams whose message framing one
// connection follows. protoactor opens one stream per connection, the
// server allows Limits.StreamsPerConnection at once, and a stream is
// forgotten when it ends; a peer that keeps more open is refused.
const maxTrackedStreams = 64

// errTooManyStreams: a peer left more streams open than any client does.
var errTooManyStreams = errors.New("trust: too many streams open on one connection")

// MessageTooLargeError is a gRPC message header that declares more bytes
// than the peer's role may send.
type MessageTooLargeError struct {
	Declared uint32
	Limit    int
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("trust: a message of %d bytes declared, over the %d bytes this peer may send", e.Declared, e.Limit)
}

// messageLimitConn is a server-side connection of the remote port whose
// reads fail once the peer declares a message over its limit.
type messageLimitConn struct {
	net.Conn
	scan    messageScanner
	refused func(error) // called once, with the first error
	err     error
}

func newMessageLimitConn(c net.Conn, limit int, refused func(error)) *messageLimitConn {
	return &messageLimitConn{Conn: c, scan: messageScanner{limit: limit}, refused: refused}
}

func (c *messageLimitConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if serr := c.scan.feed(p[:n]); serr != nil {
			c.err = serr
			c.refused(serr)
			return 0, serr // nothing of the offending read reaches gRPC
		}
	}
	return n, err
}

// frameHeaderLen is the length of an HTTP/2 frame header.
const frameHeaderLen = 9

// grpcPrefixLen is the length of a gRPC message header: a compression
// flag and a big-endian length.
const grpcPrefixLen = 5

// messageScanner follows what a client sends on an HTTP/2 connection
// (RFC 9113: the client preface, then frames) and the gRPC messages
// (a 5-byte header, then the message) carried in each stream's DATA
// frames. It only reads: malformed HTTP/2 is left to gRPC to refuse,
// except a padded DATA frame whose padding is longer than the frame.
type messageScanner struct {
	limit int

	preface int                      // bytes of the client preface seen
	header  [frameHeaderLen]byte     // the frame header being read
	headerN int                      // its bytes seen
	frame   http2.FrameHeader        // the frame whose payload is being read
	left    uint32                   // payload bytes of the frame still to come
	padLen  bool                     // the next payload byte is a DATA frame's pad length
	data    uint32                   // data bytes (not padding) of the DATA frame still to come
	streams map[uint32]streamFraming // by stream id
}

// streamFraming is where one stream is in its gRPC messages.
type streamFraming struct {
	prefix  [grpcPrefixLen]byte
	prefixN int    // bytes of the next message header seen
	body    uint32 // bytes of the current message still to come
}

var errPadding = errors.New("trust: a DATA frame's padding is longer than the frame")

// feed reads b, the next bytes the client sent, and returns an error at
// the first message header over the limit (or a malformed DATA frame).
func (s *messageScanner) feed(b []byte) error {
	for len(b) > 0 {
		switch {
		case s.preface < len(http2.ClientPreface):
			n := min(len(http2.ClientPreface)-s.preface, len(b))
			s.preface += n
			b = b[n:]
		case s.headerN < frameHeaderLen:
			n := copy(s.header[s.headerN:], b)
			s.headerN += n
			b = b[n:]
			if s.headerN == frameHeaderLen {
				if err := s.startFrame(); err != nil {
					return err
				}
			}
		default:
			n := min(uint32(len(b)), s.left)
			if s.frame.Type == http2.FrameData {
				if err := s.dataPayload(b[:n]); err != nil {
					return err
				}
			}
			s.left -= n
			b = b[n:]
			if s.left == 0 {
				s.endFrame()
			}
		}
	}
	return nil
}

// startFrame begins the frame whose header was just read.
func (s *messageScanner) startFrame() error {
	h := s.header
	s.frame = http2.FrameHeader{Length: uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2]),
		Type: http2.FrameType(h[3]), Flags: http2.Flags(h[4]), StreamID: binary.BigEndian.Uint32(h[5:]) & (1<<31 - 1)}
	s.left, s.data = s.frame.Length, s.frame.Length
	s.padLen = s.frame.Type == http2.FrameData && s.frame.Flags.Has(http2.FlagDataPadded)
	if s.padLen && s.frame.Length == 0 {
		return errPadding
	}
	if s.left == 0 {
		s.endFrame()
	}
	return nil
}

// endFrame forgets a stream that the frame just read ended.
func (s *messageScanner) endFrame() {
	f := s.frame
	switch {
	case f.Type == http2.FrameRSTStream,
		f.Type == http2.FrameData && f.Flags.Has(http2.FlagDataEndStream),
		f.Type == http2.FrameHeaders && f.Flags.Has(http2.FlagHeadersEndStream):
		delete(s.streams, f.StreamID)
	}
	s.headerN = 0
}

// dataPayload reads b, the next payload bytes of a DATA frame.
func (s *messageScanner) dataPayload(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if s.padLen {
		s.padLen = false
		pad := uint32(b[0])
		if pad > s.frame.Length-1 {
			return errPadding
		}
		s.data = s.frame.Length - 1 - pad
		b = b[1:]
	}
	n := min(uint32(len(b)), s.data)
	s.data -= n
	if n == 0 {
		return nil // padding
	}
	return s.messages(s.frame.StreamID, b[:n])
}

// messages follows the gRPC messages of stream id through its data b.
func (s *messageScanner) messages(id uint32, b []byte) error {
	st, ok := s.streams[id]
	if !ok {
		if len(s.streams) >= maxTrackedStreams {
			return errTooManyStreams
		}
		if s.streams == nil {
			s.streams = make(map[uint32]streamFraming)
		}
	}
	for len(b) > 0 {
		if st.body > 0 {
			n := min(uint32(len(b)), st.body)
			st.body -= n
			b = b[n:]
			continue
		}
		n := copy(st.prefix[st.prefixN:], b)
		st.prefixN += n
		b = b[n:]
		if st.prefixN == grpcPrefixLen {
			length := binary.BigEndian.Uint32(st.prefix[1:])
			if uint64(length) > uint64(s.limit) {
				return &MessageTooLargeError{Declared: length, Limit: s.limit}
			}
			st.body, st.prefixN = length, 0
		}
	}
	s.streams[id] = st
	return nil
}
