"""Bucket baselines (Suzanne et al., §5.3.3, Table 4): one bucket per open window.

* ``tuple_buckets.TupleBuckets``: a bucket holds references to the events, aggregated at release;
* ``aggregate_buckets.AggregateBuckets``: a bucket holds one partial per aggregate, updated at insert.
"""
