// robfig/cron v3, the parser and calendar of Kubernetes' CronJob controller, as the reference
// tests/test_cron_robfig.py compares cxlab's schedules with (built by that test into
// build/robfig-cron/).
module cxlab.dev/hack/robfig-cron

go 1.26

require github.com/robfig/cron/v3 v3.0.1
