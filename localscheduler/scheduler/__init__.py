"""Cloud Scheduler, locally: when each job runs (`plan`), how an attempt is sent (`delivery`) and
retried (`retry`), the scheduler that plays the triggers on the accelerated clock
(`cloud_scheduler`), the faults it injects into a run's first attempt (`faults`), the runs it loses
on purpose (`misses`), and its own log of every delivery (`journal`)."""
