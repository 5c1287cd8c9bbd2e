"""The engines that run a batch of PackageJobs: local threads in aotipre.fleet.batch.run, and a Ray
cluster in aotipre.fleet.engines.ray. Each takes the planned jobs and the `jobs` setting and returns
one Report per job, in the jobs' order (batch.check_packages' `engine`)."""
