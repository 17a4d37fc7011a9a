package dispatch

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardns/shardns/internal/testutil"
)

func quietSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	return system
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// stuckOnFirst spawns an actor with mailbox that passes each int it
// receives on to got, and sends it 0, on which it stays until release is
// closed: it returns once the actor holds 0, so that what is sent next
// waits in the mailbox.
func stuckOnFirst(system *actor.ActorSystem, mailbox actor.MailboxProducer) (pid *actor.PID, release chan struct{}, got chan int) {
	entered, release, got := make(chan struct{}), make(chan struct{}), make(chan int, 100)
	pid = system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		n, ok := ctx.Message().(int)
		if !ok {
			return
		}
		if n == 0 {
			close(entered)
			<-release
		}
		got <- n
	}, actor.WithMailbox(mailbox)))
	system.Root.Send(pid, 0)
	<-entered
	return pid, release, got
}

// An actor stuck on one message while 10 more arrive keeps the newest 4
// (its mailbox size), drops the 6 oldest and counts them; afterwards the
// mailbox is empty and goes idle.
func TestDroppingMailboxCountsDrops(t *testing.T) {
	system := quietSystem(t)
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"mailbox"})
	var mailbox actor.Mailbox
	pid, release, got := stuckOnFirst(system, func() actor.Mailbox {
		mailbox = newDroppingMailbox(4, dropped.WithLabelValues("test"))()
		return mailbox
	})
	for i := 1; i <= 10; i++ {
		system.Root.Send(pid, i)
	}
	if n := counterValue(t, dropped.WithLabelValues("test")); n != 6 {
		t.Fatalf("dropped counter %v after 10 messages into a mailbox of 4, want 6", n)
	}
	close(release)
	var received []int
	for range 5 {
		received = append(received, <-got)
	}
	if want := []int{0, 7, 8, 9, 10}; !slices.Equal(received, want) {
		t.Fatalf("received %v, want %v: the first, then the newest four", received, want)
	}
	if n := mailbox.UserMessageCount(); n != 0 {
		t.Fatalf("%d user messages still counted in an empty mailbox", n)
	}
	// Stopping goes through the system queue, which never drops.
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

// The ring grows as messages wait, keeping their order across its wrap,
// and drops the oldest only once limit messages wait.
func TestDroppingMailboxGrows(t *testing.T) {
	system := quietSystem(t)
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"mailbox"})
	// Message 0 is taken from the ring's first slot before the others
	// come: the 16 after it wrap around the ring's end before it grows.
	pid, release, got := stuckOnFirst(system, newDroppingMailbox(40, dropped.WithLabelValues("test")))
	for i := 1; i <= 50; i++ {
		system.Root.Send(pid, i)
	}
	if n := counterValue(t, dropped.WithLabelValues("test")); n != 10 {
		t.Fatalf("dropped counter %v after 50 messages into a mailbox of 40, want 10", n)
	}
	close(release)
	want := []int{0}
	for i := 11; i <= 50; i++ {
		want = append(want, i)
	}
	var received []int
	for range want {
		received = append(received, <-got)
	}
	if !slices.Equal(received, want) {
		t.Fatalf("received %v, want %v: the first, then the newest 40 in order", received, want)
	}
}

// A panic is escalated to the supervisor and the restarted actor keeps
// the messages still queued.
func TestDroppingMailboxRestartKeepsQueue(t *testing.T) {
	system := quietSystem(t)
	got := make(chan int, 10)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if n, ok := ctx.Message().(int); ok {
			if n == 1 {
				panic("poisonous message")
			}
			got <- n
		}
	}, actor.WithMailbox(newDroppingMailbox(8, nil))))
	for i := range 4 {
		system.Root.Send(pid, i)
	}
	var received []int
	testutil.Eventually(t, 5*time.Second, func() error {
		for {
			select {
			case n := <-got:
				received = append(received, n)
			default:
				if !slices.Equal(received, []int{0, 2, 3}) {
					return fmt.Errorf("received %v, want [0 2 3]", received)
				}
				return nil
			}
		}
	})
}
