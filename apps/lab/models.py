"""The lab keeps no tables of its own: it registers real Node and Disk records in inventory."""
