package zonemanager_test

import (
	"time"

	"github.com/shardns/shardns/actors/zonemanager"
)

// observed is an Observer that calls whichever of its functions are set.
type observed struct {
	zonemanager.NopObserver
	loading, settled func()
	gainLoaded       func(took time.Duration)
	grace            func(keys []string)
	published        func(zonemanager.Published)
}

func (o *observed) Loading() {
	if o.loading != nil {
		o.loading()
	}
}

func (o *observed) Settled() {
	if o.settled != nil {
		o.settled()
	}
}

func (o *observed) GainLoaded(took time.Duration) {
	if o.gainLoaded != nil {
		o.gainLoaded(took)
	}
}

func (o *observed) Grace(keys []string) {
	if o.grace != nil {
		o.grace(keys)
	}
}

func (o *observed) Published(p zonemanager.Published) {
	if o.published != nil {
		o.published(p)
	}
}
