module cxlab.dev/hack/images/pause

go 1.26.0
