SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['bench'], worker => 'bench');
