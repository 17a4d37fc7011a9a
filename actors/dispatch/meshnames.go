package dispatch

import (
	"hash/fnv"
	"sync/atomic"

	"github.com/shardns/shardns/zone"
)

// Mesh host names, for node-local processes: with the ring, a replica
// tells the names of its directory's mesh hosts (those every namespace
// sees, and those exported to some namespaces alone, each with its
// namespace), so that a node-local process routes a mesh name to the
// owners of its zone, and a client's namespace's own names with that
// namespace (zone/meshprivate.go).

// maxMeshBytes bounds the names a replica tells in one reply, well below
// the remote port's message limit. A directory beyond it is told as no
// names: node-local processes then leave mesh names to their forwarder,
// as before they knew them.
const maxMeshBytes = 1 << 20

// MeshNames is the mesh directory a node-local process was told.
type MeshNames struct {
	Version uint64
	Names   []string
}

// MeshSource gives the ring server the directory whose mesh names it
// tells; nil: none yet.
type MeshSource func() *zone.Directory

// meshView is a directory's mesh names as told, computed once per
// directory.
type meshView struct {
	dir     *zone.Directory
	version uint64
	names   []string
}

func newMeshView(d *zone.Directory, withheld func()) *meshView {
	names := d.MeshNames()
	size := 0
	h := fnv.New64a()
	for _, n := range names {
		size += len(n)
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	if size > maxMeshBytes {
		names = nil
		h.Reset()
		if withheld != nil {
			withheld()
		}
	}
	return &meshView{dir: d, version: h.Sum64() | 1, names: names} // never 0, "none"
}

// meshServer is the ring server's part that tells mesh names.
type meshServer struct {
	source   atomic.Pointer[MeshSource]
	withheld func() // told of each directory whose names are not told
	last     atomic.Pointer[meshView]
}

// view is the current directory's mesh names, nil without a source.
func (s *meshServer) view() *meshView {
	src := s.source.Load()
	if src == nil {
		return nil
	}
	d := (*src)()
	if d == nil {
		return nil
	}
	if v := s.last.Load(); v != nil && v.dir == d {
		return v
	}
	v := newMeshView(d, s.withheld)
	if old := s.last.Load(); old != nil && old.version == v.version {
		v.names = old.names // the same names: keep one copy
	}
	s.last.Store(v)
	return v
}

// SetMeshSource makes the ring server tell the mesh names of source's
// directory (a replica's); withheld, which may be nil, is told of each
// directory whose names are too many to tell. Call it before the server
// is asked.
func (c *RingClient) SetMeshSource(source MeshSource, withheld func()) {
	c.server.mesh.withheld = withheld
	c.server.mesh.source.Store(&source)
}

// Mesh is the mesh directory the replicas told last; nil before any.
func (c *RingClient) Mesh() *MeshNames { return c.mesh.Load() }

// takeMesh keeps the names of a reply that tells a new version.
func (c *RingClient) takeMesh(asked, version uint64, names []string) {
	if version == 0 || version == asked {
		return
	}
	if cur := c.mesh.Load(); cur != nil && cur.Version == version {
		return
	}
	c.mesh.Store(&MeshNames{Version: version, Names: names})
}
